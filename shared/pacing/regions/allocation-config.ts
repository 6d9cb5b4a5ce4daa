/**
 * The settings of strict multi-region budgets (allocations) and the deterministic functions every
 * region computes alike: the plan's home and fence, the floors every region starts a plan-day
 * with, the headroom an idle region keeps, and how long after its ack a lost region's allocation
 * comes back. Pure; the rule is `allocations.ts`, the design docs/pacing.md ("Many regions").
 */

import { REGIONS_ENV } from '../../aws/clients.js';
import { InvalidEnvError, optionalEnv } from '../../config/env.js';
import { errorKind } from '../../errors.js';
import { DEFAULT_RELEASE_CAP } from '../../spend/release.js';

/** Whether guards cap at the region's allocation. */
export type AllocationMode = 'strict' | 'off';

/** Settings of the allocation rule (the same in every region: they are a deployment setting). */
export interface AllocationConfig {
  /** `strict` with more than one region, else `off` (single region: today's behaviour exactly). */
  readonly mode: AllocationMode;
  /** Every region of the deployment; the first is the default home of every plan. */
  readonly regions: readonly string[];
  /**
   * Allocated to every region at a plan-day's start, before any demand is known, as a fraction of
   * the budget split by `weights`: every region can bid from the first instant. @default 0.1
   */
  readonly floorFraction: number;
  /**
   * The least headroom a region keeps above its spend (fraction of the budget, split by
   * `weights`): an idle region gives the rest back, and can still bid when traffic arrives, until
   * its next grant (≤ 2 ticks + 2 replication lags). @default 0.005
   */
  readonly keepFraction: number;
  /** Region weights of the floors (e.g. the forecast traffic split); normalised. @default equal */
  readonly weights?: Readonly<Record<string, number>>;
  /** A region asks for what it expects to spend within this horizon. @default 120_000 */
  readonly horizonMs: number;
  /** A region whose mailbox is fresh may spend this long (its ack). @default 120_000 */
  readonly ackLeaseMs: number;
  /** A mailbox written within this long is fresh (acked). @default 35_000 */
  readonly ackFreshMs: number;
  /** Clock skew between regions' hosts the acks allow for. @default 5_000 */
  readonly skewMarginMs: number;
  /** A region releases when it holds more than headroom × (1 + this). @default 0.5 */
  readonly hysteresis: number;
  /** In-flight lifetime T of the guards, ms. @default 600_000 */
  readonly inFlightTtlMs: number;
  /** The longest lease-ahead a guard may use (a float is spent up to this after its grant). @default T */
  readonly maxLeaseAheadMs?: number;
  /** Time for a lost region's last wins to replicate before its reclaim. @default 5_000 */
  readonly replicationMarginMs: number;
}

/** Thrown for an allocation setting out of range. */
export class AllocationConfigError extends errorKind('AllocationConfigError', 'pacing.allocation-config') {}

/** Defaults of {@link AllocationConfig} (without mode and regions). */
export const defaultAllocationSettings = {
  floorFraction: 0.1,
  keepFraction: 0.005,
  horizonMs: 120_000,
  ackLeaseMs: 120_000,
  ackFreshMs: 35_000,
  skewMarginMs: 5_000,
  hysteresis: 0.5,
  inFlightTtlMs: 600_000,
  replicationMarginMs: 5_000,
} as const;

/** Validates the settings over the defaults; the mode defaults to strict for > 1 region. */
export function allocationConfig(
  regions: readonly string[],
  overrides: Partial<Omit<AllocationConfig, 'regions'>> = {},
): AllocationConfig {
  const c: AllocationConfig = {
    ...defaultAllocationSettings,
    mode: regions.length > 1 ? 'strict' : 'off',
    ...overrides,
    regions: [...regions],
  };
  const fail = (what: string) => {
    throw new AllocationConfigError(what);
  };
  if (new Set(c.regions).size !== c.regions.length) fail(`regions ${c.regions.join(',')} repeat a region.`);
  if (c.mode !== 'strict' && c.mode !== 'off') fail(`mode ${String(c.mode)} must be strict or off.`);
  if (c.mode === 'strict' && c.regions.length === 0) fail('strict allocations need the list of regions.');
  if (!(c.floorFraction > 0 && c.floorFraction <= 0.1))
    fail(`floorFraction=${c.floorFraction} must be in (0, 0.1].`);
  if (!(c.keepFraction >= 0 && c.keepFraction <= c.floorFraction))
    fail(`keepFraction=${c.keepFraction} must be in [0, floorFraction].`);
  for (const k of ['horizonMs', 'ackLeaseMs', 'ackFreshMs', 'skewMarginMs', 'inFlightTtlMs'] as const) {
    if (!(Number.isSafeInteger(c[k]) && c[k] >= 0)) fail(`${k}=${c[k]} must be an integer ≥ 0.`);
  }
  if (!(c.hysteresis >= 0)) fail(`hysteresis=${c.hysteresis} must be ≥ 0.`);
  if (c.skewMarginMs * 2 >= c.ackLeaseMs) fail('ackLeaseMs must exceed twice skewMarginMs.');
  if (c.weights) {
    for (const r of c.regions) {
      const w = c.weights[r];
      if (!(w !== undefined && w > 0)) fail(`weights: region ${r} needs a weight > 0.`);
    }
  }
  return c;
}

/** A plan's allocation fields (budgets table; absent = default home, fence 0). */
export interface AllocationHome {
  readonly allocHome?: string;
  readonly allocFence?: number;
  readonly allocSettleUntil?: number;
}

/** The region holding a plan's authority: its `allocHome`, else the deployment's first region. */
export function homeOf(plan: AllocationHome, config: Pick<AllocationConfig, 'regions'>): string {
  return plan.allocHome ?? (config.regions[0] as string);
}

/** The plan's fence (0 until its first rehome). */
export function fenceOf(plan: AllocationHome): number {
  return plan.allocFence ?? 0;
}

/** A region's weight in the floors (normalised; equal without weights). */
function weightOf(region: string, config: Pick<AllocationConfig, 'regions' | 'weights'>): number {
  if (!config.regions.includes(region)) return 0;
  if (!config.weights) return 1 / config.regions.length;
  let total = 0;
  for (const r of config.regions) total += config.weights[r] as number;
  return (config.weights[region] as number) / total;
}

/** Region r's allocation at a plan-day's start (deterministic: every region computes the same). */
export function floorOf(budgetMicros: number, region: string, config: AllocationConfig): number {
  return Math.floor(Math.max(0, budgetMicros) * config.floorFraction * weightOf(region, config));
}

/** The least headroom region r keeps above its spend. */
export function keepOf(budgetMicros: number, region: string, config: AllocationConfig): number {
  return Math.floor(Math.max(0, budgetMicros) * config.keepFraction * weightOf(region, config));
}

/** How long after its ack a region is provably not spending (every float and bid expired). */
export function reclaimDelayMs(config: AllocationConfig): number {
  return (
    config.skewMarginMs +
    (config.maxLeaseAheadMs ?? config.inFlightTtlMs) +
    config.inFlightTtlMs +
    config.replicationMarginMs
  );
}

/** Environment variable forcing the allocation mode (`strict` | `off`); default from the regions. */
export const ALLOCATIONS_ENV = 'PACELINE_ALLOCATIONS';

/**
 * The deployment's regions (`PACELINE_REGIONS`, in order: the first is the default home) and the
 * allocation mode (`PACELINE_ALLOCATIONS`, default strict with more than one region). Without
 * `PACELINE_REGIONS` the process knows only `self`: one region, allocations off. Throws
 * InvalidEnvError for a mode other than strict or off, or a list without `self`.
 */
export function allocationSettingsFromEnv(
  self: string | undefined,
  env: Readonly<Record<string, string | undefined>> = process.env,
): { readonly regions: readonly string[]; readonly mode: AllocationMode } {
  const listed = (optionalEnv(REGIONS_ENV, undefined, env) ?? '')
    .split(',')
    .map((r) => r.trim())
    .filter((r) => r !== '');
  if (self !== undefined && listed.length > 0 && !listed.includes(self)) {
    throw new InvalidEnvError(
      REGIONS_ENV,
      listed.join(','),
      `a list of the deployment's regions including ${self}`,
    );
  }
  const regions = listed.length > 0 ? listed : self === undefined ? [] : [self];
  const raw = optionalEnv(ALLOCATIONS_ENV, undefined, env);
  if (raw !== undefined && raw !== 'strict' && raw !== 'off')
    throw new InvalidEnvError(ALLOCATIONS_ENV, raw, 'strict or off');
  return { regions, mode: (raw as AllocationMode | undefined) ?? (regions.length > 1 ? 'strict' : 'off') };
}

/**
 * What a region holds of a plan-day before its home's first entry is visible: its floor, until
 * its default lease ends — a lease from the plan-day's start, or from the plan's creation when
 * that is later (never from a future instant: a writer's clock ahead; never moving with now: the
 * home's first ack, its now + lease, always covers it). The region's pacer and its strict guards
 * compute the same (the guards lease from the first instant, before the pacer wrote anything).
 */
export function defaultAllocation(
  budgetMicros: number,
  region: string,
  config: AllocationConfig,
  day: { readonly startMs: number },
  createdAtMs: number | undefined,
  nowMs: number,
): { readonly cap: number; readonly untilMs: number } {
  const base =
    createdAtMs !== undefined && createdAtMs > day.startMs && createdAtMs <= nowMs
      ? createdAtMs
      : day.startMs;
  return {
    cap: floorOf(budgetMicros, region, config),
    untilMs: base + config.ackLeaseMs - config.skewMarginMs,
  };
}

/**
 * One region's in-flight release cap (fraction of the budget; docs/spend.md "In flight without
 * loss notices"): under strict allocations the single-region cap is split over the regions, so
 * that their releases together add at most `cap` of the budget to the combined overshoot bound
 * (docs/pacing.md, "The bound"); the guards and the controller of a region count the same.
 */
export function regionalReleaseCap(cap: number, mode: AllocationMode, regions: number): number {
  return mode === 'strict' ? cap / Math.max(1, regions) : cap;
}

/**
 * A region's controller settings for the in-flight release, as its guards count it: the default
 * cap ({@link regionalReleaseCap}) and, outside strict allocations (where the allocation, not E,
 * caps a region), the budget's headroom over E (docs/spend.md "In flight without loss notices").
 */
export function regionalRelease(
  mode: AllocationMode,
  regions: number,
): { readonly releaseCap: number; readonly releaseHeadroom: boolean } {
  return {
    releaseCap: regionalReleaseCap(DEFAULT_RELEASE_CAP, mode, regions),
    releaseHeadroom: mode !== 'strict',
  };
}

/**
 * What a budget guard of `region` needs (BudgetGuard's `allocations`): off, or the deployment's
 * allocation settings and its region (its floor before the pacer wrote an allocation).
 */
export function guardAllocations(
  mode: AllocationMode,
  regions: readonly string[],
  region: string,
): 'off' | 'strict' | { readonly config: AllocationConfig; readonly region: string } {
  if (mode === 'off') return 'off';
  if (!regions.includes(region)) return 'strict';
  return { config: allocationConfig(regions, { mode }), region };
}
