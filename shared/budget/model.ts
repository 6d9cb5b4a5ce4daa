/**
 * The budget model ("the ads database"): accounts (advertisers, with their time zone),
 * campaigns, and budget plans at several levels. Amounts are integer micros of the account's
 * currency. Plans store budgets only; spend is stored elsewhere (ledger, live counters) and the
 * remainder is always derived, so a mid-day budget change takes effect from what is left.
 */
import { inputErrorKind } from '../errors.js';
import { findPacingMode, isPacingMode, type PacingMode, pacingModeIds } from '../pacing/modes.js';
import { type Daypart, daypartProblems } from './daypart.js';
import { dayBudgetMicros, type Flight, type FlightSpent, flightProblems } from './flight.js';
import { planCurveProblem } from './plan-curve.js';
import { canonicalTimeZone, InvalidTimeZoneError } from './time-zone.js';

/** How a plan's allowance grows over its day: one of the registry's modes (shared/pacing/modes.ts). */
export type { PacingMode } from '../pacing/modes.js';

/** Level of a budget plan. */
export type PlanLevel = 'account' | 'campaign' | 'arm';

/** An advertiser account. */
export interface Account {
  readonly accountId: string;
  readonly name: string;
  /** IANA time zone; every budget day of the account begins at local midnight there. */
  readonly timeZone: string;
  /** ISO 4217 code of the micros amounts. */
  readonly currency: string;
}

/** A campaign of an account. */
export interface Campaign {
  readonly campaignId: string;
  readonly accountId: string;
  readonly name: string;
  readonly status: 'active' | 'paused';
}

/** A daily budget plan. Every plan that applies to a bid must pass before it goes out. */
export interface BudgetPlan {
  readonly level: PlanLevel;
  readonly accountId: string;
  /** Set for `campaign` and `arm` plans. */
  readonly campaignId?: string;
  /** Set for `arm` plans: an experiment arm or line item of the campaign. */
  readonly armId?: string;
  /**
   * Daily budget, integer micros; for a flight plan the daily cap (the day's budget is the
   * flight's share, never above it: shared/budget/flight.ts).
   */
  readonly dailyBudgetMicros: number;
  readonly pacingMode: PacingMode;
  /** A lifetime budget over a run of local days (absent: the same daily budget every day). */
  readonly flight?: Flight;
  /** The flight's closed days (written only by the pacer's flight closer; a plan write keeps them). */
  readonly flightSpent?: FlightSpent;
  /** Dayparting: the plan spends only inside these windows (shared/budget/daypart.ts). */
  readonly daypart?: Daypart;
  /** Mode `curve` only: the share of the day due in each local hour (24) or quarter hour (96). */
  readonly curve?: readonly number[];
  /**
   * Several regions (docs/pacing.md, "Many regions"): the region holding the plan's allocation
   * authority (absent: the deployment's first region), its fence (0 until the first rehome) and
   * the instant before which a new home grants nothing (epoch ms). Written only by
   * `budgets rehome`; a plan write keeps them.
   */
  readonly allocHome?: string;
  readonly allocFence?: number;
  readonly allocSettleUntil?: number;
  /** When the plan was first written (epoch ms; absent on plans written before it was kept). */
  readonly createdAt?: number;
}

/** A plan as the guard and the tracker use it: its identity plus its account's time zone. */
export interface ResolvedPlan extends BudgetPlan {
  readonly timeZone: string;
  /** Stable plan id inside its hash-slot scope: `account`, `campaign` or `arm:<armId>`. */
  readonly planId: string;
  /** Hash-slot scope: `a:<accountId>` for account plans, `c:<campaignId>` otherwise. */
  readonly scope: string;
}

/** Thrown when a budget object is invalid; the message names the field and what to do. */
export class BudgetValidationError extends inputErrorKind(
  'BudgetValidationError',
  'budget.invalid',
  'field',
  (field) => `${field}: `,
) {}

/** Ids end up in Redis keys and DynamoDB keys: no braces, colons, `#` or `/`. */
const ID = /^[A-Za-z0-9_.-]{1,64}$/;

/** Largest daily budget accepted: $10 M a day in micros, far inside 2^53. */
export const MAX_DAILY_BUDGET_MICROS = 10_000_000 * 1_000_000;

/** Throws {@link BudgetValidationError} unless `value` is a valid id. */
export function assertId(field: string, value: unknown): asserts value is string {
  if (typeof value !== 'string' || !ID.test(value)) {
    throw new BudgetValidationError(
      field,
      `${JSON.stringify(value)} is not a valid id: use 1–64 characters from A-Z a-z 0-9 _ . -`,
    );
  }
}

/** Validates a micros amount (integer, ≥ 0, ≤ {@link MAX_DAILY_BUDGET_MICROS}). */
export function assertBudgetMicros(field: string, value: unknown): asserts value is number {
  if (
    typeof value !== 'number' ||
    !Number.isSafeInteger(value) ||
    value < 0 ||
    value > MAX_DAILY_BUDGET_MICROS
  ) {
    throw new BudgetValidationError(
      field,
      `${JSON.stringify(value)} is not a budget: give integer micros between 0 and ${MAX_DAILY_BUDGET_MICROS} ($1 = 1000000).`,
    );
  }
}

/** Validates an account. */
export function validateAccount(a: Account): Account {
  assertId('accountId', a.accountId);
  if (typeof a.name !== 'string' || a.name.length === 0)
    throw new BudgetValidationError('name', 'must be non-empty');
  try {
    if (canonicalTimeZone(a.timeZone) !== a.timeZone) {
      throw new BudgetValidationError(
        'timeZone',
        `${JSON.stringify(a.timeZone)} is not the canonical spelling: use ${JSON.stringify(canonicalTimeZone(a.timeZone))}`,
      );
    }
  } catch (error) {
    if (error instanceof InvalidTimeZoneError)
      throw new BudgetValidationError('timeZone', error.message, { cause: error });
    throw error;
  }
  if (!/^[A-Z]{3}$/.test(a.currency)) {
    throw new BudgetValidationError(
      'currency',
      `${JSON.stringify(a.currency)} is not an ISO 4217 code such as USD`,
    );
  }
  return a;
}

/** Validates a campaign. */
export function validateCampaign(c: Campaign): Campaign {
  assertId('campaignId', c.campaignId);
  assertId('accountId', c.accountId);
  if (typeof c.name !== 'string' || c.name.length === 0)
    throw new BudgetValidationError('name', 'must be non-empty');
  if (c.status !== 'active' && c.status !== 'paused') {
    throw new BudgetValidationError('status', `${JSON.stringify(c.status)} must be "active" or "paused"`);
  }
  return c;
}

/** Validates a plan (level-specific ids present, amounts in range, known pacing mode). */
export function validatePlan(p: BudgetPlan): BudgetPlan {
  assertId('accountId', p.accountId);
  if (p.level !== 'account' && p.level !== 'campaign' && p.level !== 'arm') {
    throw new BudgetValidationError('level', `${JSON.stringify(p.level)} must be account, campaign or arm`);
  }
  if (p.level !== 'account') assertId('campaignId', p.campaignId);
  if (p.level === 'arm') assertId('armId', p.armId);
  // A stray id would be ignored by the key (an account plan's key has no campaign), so the write
  // would silently replace another plan: refuse it instead.
  if (p.level === 'account' && p.campaignId !== undefined) {
    throw new BudgetValidationError(
      'campaignId',
      'an account plan has no campaign: drop --campaign, or use --level campaign',
    );
  }
  if (p.level !== 'arm' && p.armId !== undefined) {
    throw new BudgetValidationError('armId', `a ${p.level} plan has no arm: drop --arm, or use --level arm`);
  }
  assertBudgetMicros('dailyBudgetMicros', p.dailyBudgetMicros);
  if (p.flight !== undefined) {
    if (typeof p.flight !== 'object' || p.flight === null) {
      throw new BudgetValidationError('flight', 'must be an object {startDay, endDay, budgetMicros}');
    }
    const problem = flightProblems(p.flight, p.dailyBudgetMicros)[0];
    if (problem) throw new BudgetValidationError(problem.field, problem.message);
  }
  if (p.daypart !== undefined) {
    if (typeof p.daypart !== 'object' || p.daypart === null) {
      throw new BudgetValidationError(
        'daypart',
        'must be an object {timeZone?, windows: [{weekdays, fromMinute, toMinute}]}',
      );
    }
    const problem = daypartProblems(p.daypart)[0];
    if (problem) throw new BudgetValidationError(problem.field, problem.message);
  }
  if (!isPacingMode(p.pacingMode)) {
    throw new BudgetValidationError(
      'pacingMode',
      `${JSON.stringify(p.pacingMode)} is not a pacing mode: use ${pacingModeIds().join(', ')}`,
    );
  }
  const takesCurve = findPacingMode(p.pacingMode)?.planCurve === true;
  if (takesCurve && p.curve === undefined) {
    throw new BudgetValidationError(
      'curve',
      `${p.pacingMode} paces to the plan's own curve and none is given: give --curve FILE (24 or 96 shares of the day summing to 1)`,
    );
  }
  if (p.curve !== undefined) {
    if (!takesCurve) {
      throw new BudgetValidationError(
        'curve',
        `a curve is for --pacing curve; this plan is paced ${p.pacingMode}: drop the curve, or use --pacing curve`,
      );
    }
    const problem = planCurveProblem(p.curve);
    if (problem) throw new BudgetValidationError('curve', problem);
  }
  if (p.flight === undefined && findPacingMode(p.pacingMode)?.flightSchedule) {
    throw new BudgetValidationError(
      'pacingMode',
      `${p.pacingMode} spreads a flight over its days and this plan has no flight: give the flight ` +
        '(--flight-start, --flight-end, --flight-budget, --daily-cap), or use ahead to run ahead within a day',
    );
  }
  return p;
}

/** The plan's id within its scope. */
export function planIdOf(p: Pick<BudgetPlan, 'level' | 'armId'>): string {
  return p.level === 'arm' ? `arm:${p.armId}` : p.level;
}

/** The plan's hash-slot scope (see {@link ResolvedPlan.scope}). */
export function scopeOf(p: Pick<BudgetPlan, 'level' | 'accountId' | 'campaignId'>): string {
  return p.level === 'account' ? `a:${p.accountId}` : `c:${p.campaignId}`;
}

/** Attaches the time zone, id and scope. */
export function resolvePlan(p: BudgetPlan, timeZone: string): ResolvedPlan {
  return new PlanRecord(p, timeZone, planIdOf(p), scopeOf(p));
}

/**
 * A resolved plan with one fixed set of fields, whatever the stored object carried (account plans
 * lack a campaign id, stored items carry extra attributes). A spread copy took the stored object's
 * shape, so the pacer's per-plan reads (`timeZone`, `pacingMode`, `dailyBudgetMicros`) saw a
 * dozen shapes and were a quarter of the controller step's time.
 */
class PlanRecord implements ResolvedPlan {
  readonly level: PlanLevel;
  readonly accountId: string;
  readonly campaignId?: string;
  readonly armId?: string;
  readonly dailyBudgetMicros: number;
  readonly pacingMode: PacingMode;
  readonly allocHome?: string;
  readonly allocFence?: number;
  readonly allocSettleUntil?: number;
  readonly createdAt?: number;
  readonly flight?: Flight;
  readonly flightSpent?: FlightSpent;
  readonly daypart?: Daypart;
  readonly curve?: readonly number[];

  constructor(
    p: BudgetPlan,
    readonly timeZone: string,
    readonly planId: string,
    readonly scope: string,
  ) {
    this.level = p.level;
    this.accountId = p.accountId;
    // Every instance has every field (undefined where the level has none): one shape.
    this.campaignId = p.campaignId;
    this.armId = p.armId;
    this.dailyBudgetMicros = p.dailyBudgetMicros;
    this.pacingMode = p.pacingMode;
    this.allocHome = typeof p.allocHome === 'string' ? p.allocHome : undefined;
    this.allocFence = numberOrUndefined(p.allocFence);
    this.allocSettleUntil = numberOrUndefined(p.allocSettleUntil);
    this.createdAt = numberOrUndefined(p.createdAt);
    this.flight = p.flight;
    this.flightSpent = p.flightSpent;
    this.daypart = p.daypart;
    this.curve = p.curve;
  }
}

/** The last day-plan derived per flight plan object (plans are immutable; a change is a new object). */
const onDay = new WeakMap<ResolvedPlan, { readonly day: string; readonly plan: ResolvedPlan }>();

/**
 * The plan as it applies on local `day`: the plan itself without a flight; for a flight plan, the
 * same plan with `dailyBudgetMicros` = the day's budget (shared/budget/flight.ts), so the guard,
 * the curves and the controller pace a flight day exactly like a daily plan of that budget.
 */
export function planOnDay(given: ResolvedPlan, day: string): ResolvedPlan {
  if (given.flight === undefined) return given;
  // A day-plan passed again is re-derived from its flight plan (its own budget is not the cap).
  const plan = flightPlanOf.get(given) ?? given;
  const hit = onDay.get(plan);
  if (hit && hit.day === day) return hit.plan;
  const derived = new PlanRecord(
    { ...plan, dailyBudgetMicros: dayBudgetMicros(plan, day) },
    plan.timeZone,
    plan.planId,
    plan.scope,
  );
  onDay.set(plan, { day, plan: derived });
  flightPlanOf.set(derived, plan);
  return derived;
}

/** The flight plan each day-plan was derived from. */
const flightPlanOf = new WeakMap<ResolvedPlan, ResolvedPlan>();

/** The plan as stored (its daily cap) for a day-plan of {@link planOnDay}; any other plan itself. */
export function storedPlanOf(plan: ResolvedPlan): ResolvedPlan {
  return flightPlanOf.get(plan) ?? plan;
}

/** A stored number (the document client gives numbers), else undefined. */
function numberOrUndefined(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isFinite(v) ? v : undefined;
}

/**
 * Everything that applies to bids of one campaign: the plans to check (account, campaign, and
 * arm plans keyed by arm id).
 */
export interface CampaignBudgets {
  readonly account: Account;
  readonly campaign: Campaign;
  /** Account and campaign plans: apply to every bid of the campaign. */
  readonly common: readonly ResolvedPlan[];
  /** Arm plans by arm id: apply only to bids of that arm. */
  readonly arms: ReadonlyMap<string, ResolvedPlan>;
}

/** The plans that apply to a bid of `armId` (all of them must pass). */
export function plansForBid(budgets: CampaignBudgets, armId: string | undefined): readonly ResolvedPlan[] {
  if (armId === undefined) return budgets.common;
  const arm = budgets.arms.get(armId);
  return arm ? [...budgets.common, arm] : budgets.common;
}

/** Builds {@link CampaignBudgets} from stored objects. */
export function campaignBudgets(
  account: Account,
  campaign: Campaign,
  plans: readonly BudgetPlan[],
): CampaignBudgets {
  const common: ResolvedPlan[] = [];
  const arms = new Map<string, ResolvedPlan>();
  for (const p of plans) {
    const r = resolvePlan(p, account.timeZone);
    if (p.level === 'arm') {
      if (p.campaignId === campaign.campaignId && p.armId) arms.set(p.armId, r);
    } else if (p.level === 'account' || p.campaignId === campaign.campaignId) {
      common.push(r);
    }
  }
  return { account, campaign, common, arms };
}
