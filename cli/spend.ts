/**
 * `paceline spend status [--account A] [--campaign C] [--day YYYY-MM-DD] [--json]`: per plan-day,
 * what the live counters hold — confirmed, in flight, leased to guards, remaining — and the target
 * E(t) now: the pacer's published curve when its parameters are fresh, else the linear fail-safe
 * curve the guards fall back to (docs/spend.md, "Spend status"). Read-only.
 *
 * `spendStatus(...)` is the reusable part (tests call it against a local region); the command
 * resolves targets and prints like every `paceline` command.
 */

import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { dynamoDbClient, ssmClient } from '../shared/aws/clients.js';
import { isOpenAt, planDayWindows } from '../shared/budget/daypart.js';
import { flightClosedBefore } from '../shared/budget/flight.js';
import {
  type CampaignBudgets,
  type PacingMode,
  planOnDay,
  type ResolvedPlan,
} from '../shared/budget/model.js';
import { BudgetRepository } from '../shared/budget/repository.js';
import { type DayWindow, daysBetween, dayWindow, dayWindowOf, parseDay } from '../shared/budget/time-zone.js';
import { resolvePacerShards } from '../shared/pacing/control.js';
import { PacingReader, publishedCurve } from '../shared/pacing/reader.js';
import { connectRedis, type RedisClient } from '../shared/redis/connect.js';
import { regionResources, resourceName } from '../shared/region/resources.js';
import { planDayKeys } from '../shared/spend/keys.js';
import { readPlanDay } from '../shared/spend/live-counters.js';
import { CliNotFoundError, CliUsageError } from './common.js';
import { type RegionTarget, redisOf } from './paceline/target.js';

/** One plan-day's figures (integer micros). */
export interface PlanDayStatus {
  readonly accountId: string;
  /** Unset for account plans (they span the account's campaigns). */
  readonly campaignId?: string;
  /** `account`, `campaign` or `arm:<armId>`. */
  readonly plan: string;
  /** The advertiser's local day. */
  readonly day: string;
  readonly pacingMode: PacingMode;
  readonly budgetMicros: number;
  /** False: nothing is initialised in Redis for the day yet (no spend, or a reset not rebuilt). */
  readonly initialised: boolean;
  readonly confirmedMicros: number;
  readonly inFlightMicros: number;
  readonly leasedMicros: number;
  /**
   * Several regions: this region's share of the budget (what its pacer aims at: the published
   * plan's budget while fresh), null when nothing fresh is published. A soft split.
   */
  readonly shareMicros: number | null;
  /** This region's allocation, the hard cap its guards lease within (`a`); null when none. */
  readonly allocationMicros: number | null;
  /** Its guards lease until this instant (`ae`, epoch ms); null when no allocation. */
  readonly allocationUntilMs: number | null;
  /**
   * (the allocation when there is one, else the budget) − confirmed − in flight − leased, never
   * below 0: what this region may still spend. The budget's remainder across regions is in the
   * combined rows.
   */
  readonly remainingMicros: number;
  /** The plan's flight on this day (docs/spend.md, "Flights"); absent for a daily plan. */
  readonly flight?: FlightDayStatus;
  /** A dayparted plan's (only): whether one of its windows is open now (docs/spend.md, "Dayparting"). */
  readonly windowOpen?: boolean;
  /** E(t) at `atMs`, never above the budget. */
  readonly targetMicros: number;
  /** `published`: the pacer's fresh curve; `linear`: the fail-safe curve (parameters stale or absent). */
  readonly targetSource: 'published' | 'linear';
  /** The fresh published throttle and bid multiplier; null when nothing fresh is published. */
  readonly throttle: number | null;
  readonly bidMultiplier: number | null;
  readonly atMs: number;
}

/** A flight plan's standing on one of its days (integer micros). */
export interface FlightDayStatus {
  readonly startDay: string;
  readonly endDay: string;
  readonly budgetMicros: number;
  /** The daily cap (the plan's `dailyBudgetMicros`). */
  readonly capMicros: number;
  /** Day number within the flight (1 = its first day; 0 before it, days + 1 after it). */
  readonly dayNumber: number;
  readonly days: number;
  /** Σ of the closed days before this one. */
  readonly closedMicros: number;
  /** Days before this one that ended and are not closed yet (counted at the cap in the budget). */
  readonly unclosedDays: number;
}

/** `windowOpen` of a status row: only for a dayparted plan. */
function windowOpenOf(plan: ResolvedPlan, window: DayWindow, nowMs: number): { windowOpen?: boolean } {
  const w = planDayWindows(plan, window);
  return w ? { windowOpen: isOpenAt(w, nowMs) } : {};
}

/** The flight part of a status row, for `stored` (a flight plan as stored) on `day`. */
export function flightDayStatus(stored: ResolvedPlan, day: string): FlightDayStatus | undefined {
  const f = stored.flight;
  if (!f) return undefined;
  const days = daysBetween(f.startDay, f.endDay) + 1;
  const dayNumber = Math.max(0, Math.min(days + 1, daysBetween(f.startDay, day) + 1));
  return {
    startDay: f.startDay,
    endDay: f.endDay,
    budgetMicros: f.budgetMicros,
    capMicros: stored.dailyBudgetMicros,
    dayNumber,
    days,
    ...flightClosedBefore(stored, day),
  };
}

/** What to report. */
export interface SpendStatusOptions {
  readonly dynamodb: DynamoDBClient;
  readonly redis: RedisClient;
  /** @default the region description's name */
  readonly budgetsTable?: string;
  /** The region's pacer shard count N (to find published parameters). */
  readonly shards: number;
  readonly nowMs: number;
  /** Only this account's plans. */
  readonly accountId?: string;
  /** Only this campaign's plans (and its account's plan). */
  readonly campaignId?: string;
  /** The advertiser-local day. @default today in each account's time zone */
  readonly day?: string;
}

/** Reads the status of every plan-day selected by the options. */
export async function spendStatus(options: SpendStatusOptions): Promise<PlanDayStatus[]> {
  const { redis, nowMs } = options;
  if (options.day !== undefined) parseDay(options.day);
  const repo = new BudgetRepository({
    client: options.dynamodb,
    tableName: options.budgetsTable ?? resourceName(regionResources.tables.budgets, {}),
  });
  const campaigns: CampaignBudgets[] = [];
  if (options.campaignId !== undefined) {
    const b = await repo.getCampaignBudgets(options.campaignId);
    if (!b) throw new CliNotFoundError(`Campaign ${options.campaignId} (or its account) does not exist.`);
    if (options.accountId !== undefined && b.account.accountId !== options.accountId) {
      throw new CliUsageError(`Campaign ${options.campaignId} belongs to account ${b.account.accountId}.`);
    }
    campaigns.push(b);
  } else {
    const known = (await repo.listAccounts()).map((a) => a.accountId);
    if (options.accountId !== undefined && !known.includes(options.accountId))
      throw new CliNotFoundError(`Account ${options.accountId} does not exist.`);
    const accounts = options.accountId === undefined ? known : [options.accountId];
    for (const accountId of accounts) {
      for (const id of await repo.listCampaignIds(accountId)) {
        const b = await repo.getCampaignBudgets(id);
        if (b) campaigns.push(b);
      }
    }
  }
  // The reader the ad servers use, so the target is exactly the E(t) their guards enforce.
  const reader = new PacingReader({ redis, clock: { now: () => nowMs }, shards: options.shards });
  await reader.prefetch(
    campaigns.map((b) => ({ accountId: b.account.accountId, campaignId: b.campaign.campaignId })),
  );
  const curve = publishedCurve(reader);
  const plans = new Map<string, { plan: ResolvedPlan; window: DayWindow; flight?: FlightDayStatus }>();
  for (const b of campaigns) {
    const window =
      options.day === undefined
        ? dayWindow(nowMs, b.account.timeZone)
        : dayWindowOf(options.day, b.account.timeZone);
    for (const stored of [...b.common, ...b.arms.values()]) {
      const plan = planOnDay(stored, window.day);
      const flight = flightDayStatus(stored, window.day);
      plans.set(planDayKeys(plan, window.day).state, { plan, window, ...(flight ? { flight } : {}) });
    }
  }
  const out: PlanDayStatus[] = [];
  for (const [key, { plan, window, flight }] of plans) {
    const live = await readPlanDay(redis, key, nowMs);
    const initialised = live.epoch !== undefined;
    const confirmed = initialised ? live.confirmedMicros : 0;
    const inFlight = initialised ? live.inFlightMicros : 0;
    const leased = initialised ? live.leasedMicros : 0;
    const [a, ae] = await redis.hmget(key, 'a', 'ae');
    const allocation = a === null ? null : Number(a);
    const cap = allocation ?? plan.dailyBudgetMicros;
    const fresh = reader.freshPlan(plan, window);
    out.push({
      accountId: plan.accountId,
      ...(plan.level === 'account' ? {} : { campaignId: plan.campaignId as string }),
      plan: plan.planId,
      day: window.day,
      pacingMode: plan.pacingMode,
      budgetMicros: plan.dailyBudgetMicros,
      initialised,
      confirmedMicros: confirmed,
      inFlightMicros: inFlight,
      leasedMicros: leased,
      shareMicros: fresh?.budgetMicros ?? null,
      allocationMicros: allocation,
      allocationUntilMs: ae === null ? null : Number(ae),
      remainingMicros: Math.max(0, cap - confirmed - inFlight - leased),
      targetMicros: curve.expectedMicros(plan, window, nowMs),
      targetSource: fresh ? 'published' : 'linear',
      throttle: fresh?.throttle ?? null,
      bidMultiplier: fresh?.bidMultiplier ?? null,
      ...(flight ? { flight } : {}),
      ...windowOpenOf(plan, window, nowMs),
      atMs: nowMs,
    });
  }
  return out.sort(
    (a, b) =>
      a.accountId.localeCompare(b.accountId) ||
      (a.campaignId ?? '').localeCompare(b.campaignId ?? '') ||
      a.plan.localeCompare(b.plan),
  );
}

/** One plan-day across every region read (what the budget itself has left). */
export interface CombinedPlanDay {
  readonly accountId: string;
  readonly campaignId?: string;
  readonly plan: string;
  readonly day: string;
  readonly budgetMicros: number;
  /** Regions the figures add up. */
  readonly regions: readonly string[];
  readonly confirmedMicros: number;
  readonly inFlightMicros: number;
  readonly leasedMicros: number;
  /** Σ the regions' allocations; null when no region has one (one region, allocations off). */
  readonly allocatedMicros: number | null;
  /** budget − Σ (confirmed + in flight + leased), never below 0. */
  readonly remainingMicros: number;
  /** Σ (confirmed + in flight + leased) − budget when above it, else 0. */
  readonly overMicros: number;
}

/** One plan-day's rows from every region read: the first, and each with its region. */
export interface PlanDayParts {
  readonly first: PlanDayStatus;
  readonly parts: { readonly region: string; readonly p: PlanDayStatus }[];
}

/** The key {@link planDayParts} groups by: account, campaign ('' for an account plan), plan, day. */
export function planDayKey(p: Pick<PlanDayStatus, 'accountId' | 'campaignId' | 'plan' | 'day'>): string {
  return `${p.accountId}|${p.campaignId ?? ''}|${p.plan}|${p.day}`;
}

/** The regions' status rows grouped by plan-day ({@link planDayKey}), in first-seen order. */
export function planDayParts(
  regions: readonly { region: string; plans: readonly PlanDayStatus[] }[],
): Map<string, PlanDayParts> {
  const rows = new Map<string, PlanDayParts>();
  for (const r of regions) {
    for (const p of r.plans) {
      const key = planDayKey(p);
      const row = rows.get(key) ?? { first: p, parts: [] };
      row.parts.push({ region: r.region, p });
      rows.set(key, row);
    }
  }
  return rows;
}

/** The combined row of every plan-day the regions report (by account, campaign, plan, day). */
export function combinedStatus(
  regions: readonly { region: string; plans: readonly PlanDayStatus[] }[],
): CombinedPlanDay[] {
  return [...planDayParts(regions).values()].map(({ first, parts }) => {
    let confirmed = 0;
    let inFlight = 0;
    let leased = 0;
    let allocated: number | null = null;
    for (const { p } of parts) {
      confirmed += p.confirmedMicros;
      inFlight += p.inFlightMicros;
      leased += p.leasedMicros;
      if (p.allocationMicros !== null) allocated = (allocated ?? 0) + p.allocationMicros;
    }
    const committed = confirmed + inFlight + leased;
    return {
      accountId: first.accountId,
      ...(first.campaignId === undefined ? {} : { campaignId: first.campaignId }),
      plan: first.plan,
      day: first.day,
      budgetMicros: first.budgetMicros,
      regions: parts.map((x) => x.region),
      confirmedMicros: confirmed,
      inFlightMicros: inFlight,
      leasedMicros: leased,
      allocatedMicros: allocated,
      remainingMicros: Math.max(0, first.budgetMicros - committed),
      overMicros: Math.max(0, committed - first.budgetMicros),
    };
  });
}

/** The combined table (one row per plan-day across regions). */
function combinedLines(rows: readonly CombinedPlanDay[]): string[] {
  const lines = [
    'all regions (combined)',
    '  account        campaign       plan         day         budget     confirmed  in-flight  leased     allocated  remaining  over',
  ];
  for (const c of rows) {
    const cells = [
      c.accountId.padEnd(13),
      (c.campaignId ?? '-').padEnd(13),
      c.plan.padEnd(11),
      c.day.padEnd(10),
      dollars(c.budgetMicros).padStart(10),
      dollars(c.confirmedMicros).padStart(10),
      dollars(c.inFlightMicros).padStart(9),
      dollars(c.leasedMicros).padStart(9),
      (c.allocatedMicros === null ? '-' : dollars(c.allocatedMicros)).padStart(10),
      dollars(c.remainingMicros).padStart(10),
      `${dollars(c.overMicros).padStart(5)}  (${c.regions.length} region${c.regions.length === 1 ? '' : 's'})`,
    ];
    lines.push(`  ${cells.join('  ')}`);
  }
  return lines;
}

const dollars = (micros: number) => (micros / 1e6).toFixed(2);

/** The human-readable table (amounts in currency units). */
export function formatSpendStatus(
  regions: readonly { region: string; plans: readonly PlanDayStatus[] }[],
): string {
  const lines: string[] = [];
  for (const r of regions) {
    lines.push(r.region);
    if (r.plans.length === 0) {
      lines.push('  (no plans)');
      continue;
    }
    lines.push(
      '  account        campaign       plan         day         budget     share (soft)  allocation (cap)  confirmed  in-flight  leased     remaining  target E(t)',
    );
    const opt = (m: number | null) => (m === null ? '-' : dollars(m));
    for (const p of r.plans) {
      const cells = [
        p.accountId.padEnd(13),
        (p.campaignId ?? '-').padEnd(13),
        p.plan.padEnd(11),
        p.day.padEnd(10),
        dollars(p.budgetMicros).padStart(10),
        opt(p.shareMicros).padStart(12),
        opt(p.allocationMicros).padStart(16),
        dollars(p.confirmedMicros).padStart(10),
        dollars(p.inFlightMicros).padStart(9),
        dollars(p.leasedMicros).padStart(9),
        dollars(p.remainingMicros).padStart(10),
        `${dollars(p.targetMicros).padStart(10)} (${p.targetSource})${p.initialised ? '' : '  not initialised'}`,
      ];
      lines.push(`  ${cells.join('  ')}`);
    }
  }
  if (regions.length > 1) lines.push(...combinedLines(combinedStatus(regions)));
  return lines.join('\n');
}

/** Per target region, the plan-days of the selection (what `paceline spend status` prints). */
export async function readSpendStatus(
  targets: readonly RegionTarget[],
  selection: { readonly accountId?: string; readonly campaignId?: string; readonly day?: string },
  nowMs: number,
): Promise<{ region: string; plans: PlanDayStatus[] }[]> {
  const regions = [];
  for (const t of targets) {
    const timeouts = { connectionTimeoutMs: 2_000, requestTimeoutMs: 5_000, maxAttempts: 2 };
    const dynamodb = dynamoDbClient(t.endpoints, timeouts);
    const ssm = ssmClient(t.endpoints, timeouts);
    const redis = connectRedis(redisOf(t), {
      maxRetriesPerRequest: 1,
      redisOptions: { connectTimeout: 3_000 },
    });
    redis.on('error', () => {});
    try {
      const plans = await spendStatus({
        dynamodb,
        redis,
        budgetsTable: resourceName(regionResources.tables.budgets, t.env),
        shards: await resolvePacerShards(t.env, ssm, t.region),
        nowMs,
        ...selection,
      });
      regions.push({ region: t.region, plans });
    } finally {
      redis.disconnect();
      dynamodb.destroy();
      ssm.destroy();
    }
  }
  return regions;
}
