/**
 * The pacer's memory of its plans: per distinct plan its controller state and forecast (and what of
 * them is stored in Redis), and the tick's work list — every distinct plan of the active
 * campaigns with its current day and spend key, and per campaign the indexes of its plans —
 * rebuilt only when the budgets change or a plan's day ends.
 */
import { type CampaignBudgets, planOnDay, plansForBid, type ResolvedPlan } from '../budget/model.js';
import { type DayWindow, dayWindow } from '../budget/time-zone.js';
import { planDayKeys } from '../spend/keys.js';
import { assertPublishable, encodeCurve, fieldNamesOf, InvalidPacingParamsError } from './codec.js';
import type { PacingController, PriorLookup } from './controller/api.js';
import { failSafeParams, PacingInputError } from './controller/index.js';
import { planField } from './keys.js';
import { UnknownPacingModeError } from './modes.js';
import { TOP_CAMPAIGNS_REPORTED, topIndexes } from './tick-outcome.js';
import type { CurvePoints, PlanPacingParams, PlanSpendSnapshot } from './types.js';

/** What the pacer holds of one distinct plan. */
export interface PlanMemory {
  plan: ResolvedPlan;
  state: unknown;
  forecast: unknown;
  /** Encoded state / forecast as last written to (or loaded from) Redis by this process. */
  writtenState?: string;
  writtenForecast?: string;
  /**
   * The forecast object `forecastText` encodes: forecasts are immutable and change a few times a
   * day, so the tick's comparison with what is stored skips re-encoding an unchanged one.
   */
  forecastTextOf?: unknown;
  forecastText?: string;
  /** The curve object `curveText` encodes (its `e:` value): curves change only when re-anchored. */
  curveTextOf?: CurvePoints;
  curveText?: string;
  /** Loaded from Redis, not yet decoded. */
  loadedState?: string;
  loadedForecast?: string;
  /** The id of the last plan list that held this plan (see {@link PlanList.id}). */
  listedIn?: number;
}

/** One entry of the tick's work list. */
export interface PlanAtDay {
  readonly field: string;
  readonly plan: ResolvedPlan;
  readonly day: DayWindow;
  /** The plan-day's live-spend state key. */
  readonly spendKey: string;
  readonly memory: PlanMemory;
}

/** The tick's work list: distinct plans, and per active campaign the indexes of its plans. */
export interface PlanList {
  /** Unique per list built (its plans' memories carry it: `listedIn`). */
  readonly id: number;
  readonly generation: number;
  readonly campaigns: number;
  readonly validUntil: number;
  readonly list: PlanAtDay[];
  /** Per campaign (aligned with the active campaigns): indexes into `list`, publishing order. */
  readonly byCampaign: Int32Array[];
  /**
   * Indexes of the campaign plans with the largest daily budgets (the dashboard's series), chosen
   * when the list is built: the tick reports only these, instead of scanning every plan.
   */
  readonly top: Int32Array;
}

/** Every plan this process met, and the tick's work list over them. */
export class PlanBook {
  /** By plan field (keys.ts `planField`). */
  readonly plans = new Map<string, PlanMemory>();
  private lists = 0;
  private current: PlanList | undefined;
  private staged = noStagedWrites();

  /**
   * Every distinct plan of the campaigns, with its current day and spend key (one entry per
   * account plan). Rebuilt only when the budgets change or a plan's day ends.
   */
  list(campaigns: readonly CampaignBudgets[], nowMs: number, generation: number): PlanList {
    const cached = this.current;
    if (
      cached &&
      cached.generation === generation &&
      cached.campaigns === campaigns.length &&
      nowMs < cached.validUntil
    ) {
      return cached;
    }
    const index = new Map<string, number>();
    const list: PlanAtDay[] = [];
    const byCampaign: Int32Array[] = [];
    let validUntil = Number.POSITIVE_INFINITY;
    for (const b of campaigns) {
      const plans = plansOfCampaign(b);
      const idx = new Int32Array(plans.length);
      plans.forEach((stored, j) => {
        const field = planField(stored);
        let at = index.get(field);
        if (at === undefined) {
          const day = dayWindow(nowMs, stored.timeZone);
          if (day.endMs < validUntil) validUntil = day.endMs;
          // A flight plan is paced as a daily plan of the day's budget (shared/budget/flight.ts).
          const plan = planOnDay(stored, day.day);
          let memory = this.plans.get(field);
          if (!memory) {
            memory = { plan, state: undefined, forecast: undefined };
            this.plans.set(field, memory);
          }
          memory.plan = plan;
          at = list.length;
          index.set(field, at);
          list.push({ field, plan, day, spendKey: planDayKeys(plan, day.day).state, memory });
        }
        idx[j] = at;
      });
      byCampaign.push(idx);
    }
    // Candidates for the dashboard's largest campaign plans: a few times k by daily budget (the
    // reported order uses the budget the controller paced, which region shares may lower).
    const top = topIndexes(list, 4 * TOP_CAMPAIGNS_REPORTED);
    const id = ++this.lists;
    for (const p of list) p.memory.listedIn = id;
    this.current = {
      id,
      generation,
      campaigns: campaigns.length,
      validUntil,
      list,
      byCampaign,
      top,
    };
    return this.current;
  }

  /**
   * The state and forecast fields that differ from what is stored (`field, text` pairs), staged
   * until {@link commitStateWrites} (the publish was accepted).
   */
  stateWrites(controller: PacingController<unknown, unknown>): { state: string[]; forecast: string[] } {
    const state: string[] = [];
    const forecast: string[] = [];
    const staged = noStagedWrites();
    this.staged = staged;
    for (const [field, m] of this.plans) {
      // A plan not stepped since a takeover loaded its stored state (`loadedState`, decoded at its
      // next step): what is stored is its state; this process's older object must not replace it.
      if (m.state !== undefined && m.loadedState === undefined) {
        const raw = controller.encodeState(m.state);
        if (raw !== m.writtenState) {
          state.push(field, raw);
          staged.state.push(m);
          staged.stateText.push(raw);
        }
      }
      if (m.forecast !== undefined && m.loadedForecast === undefined) {
        const raw = forecastText(controller, m, m.forecast);
        if (raw !== m.writtenForecast) {
          forecast.push(field, raw);
          staged.forecast.push(m);
          staged.forecastText.push(raw);
        }
      }
    }
    return { state, forecast };
  }

  /**
   * A follower's upkeep after its step: the texts a takeover compares with what is stored — each
   * plan's forecast and `e:` curve — encoded as their objects change (a forecast a few times a day,
   * a curve when re-anchored), so the first tick as publisher compares strings instead of encoding
   * 150,000 of each inside its window. `results` are the tick's steps, aligned with `list`.
   */
  keepTextsCurrent(
    controller: PacingController<unknown, unknown>,
    list: PlanList,
    results: readonly PlanResult[],
  ): void {
    for (let i = 0; i < list.list.length; i++) {
      const m = (list.list[i] as PlanAtDay).memory;
      if (m.forecast !== undefined && m.loadedForecast === undefined) forecastText(controller, m, m.forecast);
      const r = results[i];
      if (r !== undefined) curveText(m, r.params.curve);
    }
  }

  /** The staged writes landed: they are what is stored. */
  commitStateWrites(): void {
    const { state, stateText, forecast, forecastText } = this.staged;
    for (let i = 0; i < state.length; i++) (state[i] as PlanMemory).writtenState = stateText[i];
    for (let i = 0; i < forecast.length; i++) (forecast[i] as PlanMemory).writtenForecast = forecastText[i];
    this.staged = noStagedWrites();
  }
}

/** Writes of a publish in progress (plan, text), committed once it is accepted. */
interface StagedWrites {
  readonly state: PlanMemory[];
  readonly stateText: string[];
  readonly forecast: PlanMemory[];
  readonly forecastText: string[];
}

function noStagedWrites(): StagedWrites {
  return { state: [], stateText: [], forecast: [], forecastText: [] };
}

/** A campaign's plans in publishing order, their ids joined, and its hash's field names (lazy). */
interface CampaignPlans {
  plans: ResolvedPlan[];
  key: string;
  fields?: string[];
}

const plansCache = new WeakMap<CampaignBudgets, CampaignPlans>();

export function campaignPlans(b: CampaignBudgets): CampaignPlans {
  let cached = plansCache.get(b);
  if (!cached) {
    const arms = [...b.arms.entries()].sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0)).map(([, p]) => p);
    const plans = [...plansForBid(b, undefined), ...arms];
    cached = { plans, key: plans.map((p) => p.planId).join(',') };
    plansCache.set(b, cached);
  }
  return cached;
}

/**
 * Every plan of a campaign in publishing order: account, campaign, then arms by id (stable).
 * Cached per budgets object (the cache rebuilds that object when the campaign's budgets change).
 */
export function plansOfCampaign(b: CampaignBudgets): readonly ResolvedPlan[] {
  return campaignPlans(b).plans;
}

/**
 * The field names of a campaign hash in publishing order: `plans`, then `p:` and `e:` per plan
 * (contract v2). Cached with the plans: a takeover names every field of the shard twice (the read
 * of what is published, the whole rewrite).
 */
export function campaignFields(b: CampaignBudgets): readonly string[] {
  const c = campaignPlans(b);
  if (c.fields === undefined) {
    const fields = ['plans'];
    for (const p of c.plans) fields.push(...fieldNamesOf(p.planId));
    c.fields = fields;
  }
  return c.fields;
}

/** The `plans` field of a campaign hash: its plan ids in publishing order. */
export function plansKeyOf(b: CampaignBudgets): string {
  return campaignPlans(b).key;
}

/**
 * A forecast a takeover loaded becomes the plan's: this process's own forecast object when it
 * encodes to the same text (a warm instance learned what its predecessor learned: the object, and
 * the controller's curve memo built on it, carry on), else the decoded text. Either way the text
 * is what the object encodes to, so the publish compares it with what is stored without encoding.
 */
function adoptForecast(
  controller: PacingController<unknown, unknown>,
  memory: PlanMemory,
  loaded: string,
): void {
  memory.loadedForecast = undefined;
  const own = memory.forecast;
  if (own !== undefined && forecastText(controller, memory, own) === loaded) return;
  const f = controller.decodeForecast(loaded);
  memory.forecast = f;
  memory.forecastTextOf = f;
  memory.forecastText = loaded;
}

/** The stored text of a plan's forecast object, encoded once per object (forecasts are immutable). */
function forecastText(
  controller: PacingController<unknown, unknown>,
  memory: PlanMemory,
  forecast: unknown,
): string {
  if (memory.forecastTextOf !== forecast || memory.forecastText === undefined) {
    memory.forecastText = controller.encodeForecast(forecast);
    memory.forecastTextOf = forecast;
  }
  return memory.forecastText;
}

/** The `e:` value of a plan's curve, encoded once per curve object. */
export function curveText(memory: PlanMemory, curve: CurvePoints): string {
  if (memory.curveTextOf !== curve || memory.curveText === undefined) {
    memory.curveText = encodeCurve(curve);
    memory.curveTextOf = curve;
  }
  return memory.curveText;
}

/** One plan's step at a tick. */
export interface PlanResult {
  readonly params: PlanPacingParams;
  readonly day: DayWindow;
  /** The `p:` value, encoded once per tick however many campaigns share the plan. */
  encoded?: string;
}

/** What every plan's step is given besides its own inputs. */
export interface StepContext {
  readonly controller: PacingController<unknown, unknown>;
  readonly prior: PriorLookup | undefined;
  readonly nowMs: number;
  /** A plan got the fail-safe, for this reason. */
  readonly onInvalid: (reason: string) => void;
}

/**
 * One controller step per plan of [from, to) (pure) into `results`, falling back to fail-safe
 * parameters for bad output; returns how many got the fail-safe (invalid). `shares[i - from]`
 * is plan i's region share (absent: its own budget). A plan whose stored state a takeover loaded
 * decodes it first.
 */
export function stepPlans(
  ctx: StepContext,
  plans: readonly PlanAtDay[],
  spend: readonly PlanSpendSnapshot[],
  shares: readonly number[] | undefined,
  results: PlanResult[],
  from: number,
  to: number,
): number {
  const { controller, nowMs } = ctx;
  let invalid = 0;
  for (let i = from; i < to; i++) {
    const { plan, day, memory } = plans[i] as PlanAtDay;
    if (memory.loadedForecast !== undefined) adoptForecast(controller, memory, memory.loadedForecast);
    let params: PlanPacingParams;
    const budgetMicros = shares?.[i - from];
    try {
      if (memory.loadedState !== undefined) {
        // A state of a mode this version does not know throws (UnknownPacingModeError): the
        // stored text stays loaded, so it is neither continued as another mode nor overwritten,
        // and a leader that knows the mode continues it.
        memory.state = controller.decodeState(memory.loadedState, memory.state);
        memory.loadedState = undefined;
      }
      // One object shape for every plan (a conditional spread made the controller's reads of
      // its input megamorphic); an undefined share means the plan's own budget.
      const step = controller.step(
        { plan, day, spend: spend[i] as PlanSpendSnapshot, nowMs, budgetMicros, prior: ctx.prior },
        memory.state,
        memory.forecast,
      );
      assertPublishable(step.params);
      params = step.params;
      memory.state = step.state;
      memory.forecast = step.forecast;
    } catch (error) {
      // A bad input (a corrupt budget, a tick outside the plan's day, a pacing mode of another
      // version) or a bad output of one plan must not stop the shard: that plan gets the
      // fail-safe, counted in ParamsInvalid; the first reason goes into the tick's outcome.
      if (
        !(error instanceof InvalidPacingParamsError) &&
        !(error instanceof PacingInputError) &&
        !(error instanceof UnknownPacingModeError)
      )
        throw error;
      invalid++;
      ctx.onInvalid(`plan ${plan.scope}/${plan.planId}: ${error.message}`);
      params = failSafeParams(plan, day, budgetMicros === undefined ? {} : { budgetMicros });
    }
    results[i] = { params, day };
  }
  return invalid;
}
