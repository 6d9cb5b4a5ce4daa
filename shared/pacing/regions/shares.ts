/**
 * One budget across regions (DESIGN.md requirement 9): the pure rule that splits what is left of
 * a plan-day's budget into region shares, re-applied every tick, and the full-speed demand
 * estimate each region contributes. No I/O; the adapter is `region-shares.ts`, the design and the
 * overshoot bound are in docs/pacing.md ("Many regions").
 *
 * Share of region r for a plan-day with budget B, at a tick:
 *
 *   S_q   spend of region q (confirmed + in flight + leased): r's own fresh from its live
 *         counters, the peers' from their replicated summaries (late by at most the replication lag)
 *   R     = max(0, B − Σ_q S_q)                                   what is left, as r sees it
 *   a_r   = min of r's own demand figures published within the lag window (L + one tick)
 *   b_q   = q's demand as replicated (one of the figures q published within that window)
 *   f     = floorFraction × B / day length                       a floor on every weight
 *   w_r   = (a_r + f) / (a_r + f + Σ_{q≠r} (b_q + f))
 *   share = min(B, S_r + w_r × R)                                 quantised (below)
 *
 * Why the minimum for the own figure: b_q ≥ a_q whenever the lag is within the window, so
 * w_r ≤ (a_r + f) / Σ_q (a_q + f) and Σ_r w_r ≤ 1 — regions that disagree because of the lag can
 * never hand out more than what is left. The floor keeps a region whose traffic vanished with a
 * sliver of the remainder (its share can grow again when traffic returns; without it a region
 * with share 0 spends 0 and its demand estimate stays 0 for ever), and the remainder it holds
 * shrinks every tick as the others spend theirs.
 */
import { errorKind } from '../../errors.js';

/** The settings of the share rule. */
export interface ShareConfig {
  /**
   * Floor of every region's weight, as a fraction of the plan's average budget rate (B / day
   * length). @default 0.05
   */
  readonly floorFraction: number;
  /**
   * A share grows only when the new value exceeds the current one by more than this fraction of
   * what is left (R): shares then move rarely in steady state, so the controller's curve is not
   * re-anchored every tick. @default 0.01
   */
  readonly raiseQuantum: number;
  /** A share shrinks only when it falls by more than this fraction of R. @default 0.002 */
  readonly lowerQuantum: number;
  /**
   * Replication lag the rule is safe for (DynamoDB global tables: typically under a second); the
   * own demand figure is the minimum of those published within this lag plus one tick.
   * @default 5_000
   */
  readonly maxReplicationLagMs: number;
  /** Ticks in the demand window (a vanished region's demand is 0 after this many). @default 3 */
  readonly demandWindowTicks: number;
  /**
   * A sparse plan-day (fewer than half of its ticks carry spend: a few impressions a minute or
   * less) reads its demand over this many ticks: in 3 ticks it would read 0 or one impression's
   * price, and its budget would be split at random. @default 60 (10 minutes of 10 s ticks)
   */
  readonly demandWindowMaxTicks: number;
}

/** The defaults of {@link ShareConfig}. */
export const defaultShareConfig: ShareConfig = {
  floorFraction: 0.05,
  raiseQuantum: 0.01,
  lowerQuantum: 0.002,
  maxReplicationLagMs: 5_000,
  demandWindowTicks: 3,
  demandWindowMaxTicks: 60,
};

/** Thrown for a share setting out of range. */
export class ShareConfigError extends errorKind('ShareConfigError', 'pacing.share-config') {}

/** Validates a partial configuration over the defaults. */
export function shareConfig(overrides: Partial<ShareConfig> = {}): ShareConfig {
  const c = { ...defaultShareConfig, ...overrides };
  const check = (name: keyof ShareConfig, ok: boolean, what: string) => {
    if (!ok) throw new ShareConfigError(`${name}=${c[name]} must be ${what}.`);
  };
  check('floorFraction', c.floorFraction > 0 && c.floorFraction <= 1, 'in (0, 1]');
  check('raiseQuantum', c.raiseQuantum >= 0 && c.raiseQuantum < 1, 'in [0, 1)');
  check('lowerQuantum', c.lowerQuantum >= 0 && c.lowerQuantum < 1, 'in [0, 1)');
  check(
    'maxReplicationLagMs',
    Number.isInteger(c.maxReplicationLagMs) && c.maxReplicationLagMs >= 0,
    'an integer ≥ 0',
  );
  check(
    'demandWindowTicks',
    Number.isInteger(c.demandWindowTicks) && c.demandWindowTicks >= 1,
    'an integer ≥ 1',
  );
  check(
    'demandWindowMaxTicks',
    Number.isInteger(c.demandWindowMaxTicks) && c.demandWindowMaxTicks >= c.demandWindowTicks,
    'an integer ≥ demandWindowTicks',
  );

  return c;
}

/** A peer region's replicated figures for one plan-day. */
export interface PeerFigures {
  readonly region: string;
  /** Confirmed + in flight + leased, micros. */
  readonly spentMicros: number;
  /** Full-speed demand, micros per second. */
  readonly demandMicrosPerSec: number;
}

/** Inputs of {@link regionShare}. */
export interface ShareInput {
  readonly budgetMicros: number;
  readonly dayLengthMs: number;
  /** This region's own spend (fresh) and demand figure (the minimum over the lag window). */
  readonly ownSpentMicros: number;
  readonly ownDemandMicrosPerSec: number;
  readonly peers: readonly PeerFigures[];
  /** The share in force (last tick's), for the quantisation. */
  readonly previousMicros?: number;
  /**
   * Strict allocations only (the allocation, not the share, is the hard cap): while some
   * region's demand is not measured yet, this region aims at everything left (weight 1) instead
   * of an equal split that would halve a busy region's target at a plan-day's start.
   */
  readonly optimistic?: boolean;
}

/** What {@link regionShare} decided. */
export interface ShareDecision {
  /** This region's budget for the plan-day, integer micros (spend so far + its part of R). */
  readonly shareMicros: number;
  readonly weight: number;
  /** R as this region sees it. */
  readonly remainingMicros: number;
  /** True when the raw share differed from the previous one by less than the quantum. */
  readonly held: boolean;
}

/** The share rule (module comment). Pure. */
export function regionShare(input: ShareInput, config: ShareConfig = defaultShareConfig): ShareDecision {
  const B = Math.max(0, input.budgetMicros);
  const own = Math.max(0, input.ownSpentMicros);
  let spent = own;
  const floor = (config.floorFraction * B) / Math.max(1, input.dayLengthMs / 1000);
  const ownWeight = Math.max(0, input.ownDemandMicrosPerSec) + floor;
  let total = ownWeight;
  for (const p of input.peers) {
    spent += Math.max(0, p.spentMicros);
    total += Math.max(0, p.demandMicrosPerSec) + floor;
  }
  const remaining = Math.max(0, B - spent);
  const weight = input.optimistic ? 1 : total > 0 ? ownWeight / total : 1;
  const raw = Math.min(B, Math.floor(own + weight * remaining));
  const prev = input.previousMicros;
  if (prev !== undefined && prev >= own && prev <= B) {
    const up = raw - prev;
    if (
      (up > 0 && up <= config.raiseQuantum * remaining) ||
      (up < 0 && -up <= config.lowerQuantum * remaining)
    ) {
      return { shareMicros: prev, weight, remainingMicros: remaining, held: true };
    }
  }
  return { shareMicros: raw, weight, remainingMicros: remaining, held: false };
}

/** One observation of a plan-day's own spend and the gain the ad servers applied since the last. */
interface DemandSample {
  readonly atMs: number;
  readonly spentMicros: number;
  /** throttle × bid multiplier in force from this sample until the next (e^u of the controller). */
  readonly gain: number;
  /** The interval ending here was held back by the region's allocation: it says nothing of demand. */
  readonly censored: boolean;
}

/**
 * Full-speed demand of a plan-day in one region: Σ Δspend ÷ Σ gain·Δt over the last
 * `windowTicks` intervals (what it would spend at throttle 1 and multiplier 1, the controller's
 * own estimator applied to a short window), micros per second. Spend paced down by a small share
 * still shows the region's traffic, so the split follows traffic, not the previous split.
 *
 * A sparse plan-day — fewer than half of the intervals before its latest run of spendless ones
 * carry spend (a few impressions a minute or less: a $1 or $5 budget) — reads over the last
 * `maxTicks` intervals: three ticks of it hold nothing or one impression. A dense one keeps the
 * short window, so when its traffic vanishes (a run of spendless intervals after dense ones) its
 * demand reads 0 within `windowTicks`.
 */
export class DemandWindow {
  private readonly samples: DemandSample[] = [];
  private readonly maxTicks: number;

  constructor(
    private readonly windowTicks: number,
    maxTicks = windowTicks,
  ) {
    this.maxTicks = Math.max(windowTicks, maxTicks);
  }

  /**
   * Adds this tick's spend and the gain published for the coming interval. `heldBackAtMs`: when
   * the region's allocation last held a lease back (strict allocations); an interval it falls in
   * is left out of the estimate.
   */
  observe(atMs: number, spentMicros: number, gain: number, heldBackAtMs?: number): void {
    const last = this.samples.at(-1);
    if (last && atMs <= last.atMs) return;
    const censored = last !== undefined && heldBackAtMs !== undefined && heldBackAtMs > last.atMs;
    this.samples.push({ atMs, spentMicros, gain: Math.max(0, gain), censored });
    while (this.samples.length > this.maxTicks + 1) this.samples.shift();
  }

  /** The estimate; undefined before two samples, or when every interval was held back. */
  demandMicrosPerSec(): number | undefined {
    if (this.samples.length < 2) return undefined;
    // Intervals newest first (uncensored: spend capped by the allocation shows the cap, not the
    // traffic — a region stalled at its cap would read 0 and never ask for more).
    const intervals: { spend: number; exposure: number }[] = [];
    for (let i = this.samples.length - 1; i >= 1; i--) {
      const a = this.samples[i - 1] as DemandSample;
      const b = this.samples[i] as DemandSample;
      if (b.censored) continue;
      intervals.push({
        spend: Math.max(0, b.spentMicros - a.spentMicros),
        // A gain of 0 (nothing bid) says nothing about demand: floor it so a region whose share
        // was cut to nothing still reports the traffic it sees once it may bid again.
        exposure: Math.max(a.gain, 1e-4) * ((b.atMs - a.atMs) / 1000),
      });
    }
    if (intervals.length === 0) return undefined;
    const use = this.sparse(intervals) ? intervals.length : Math.min(this.windowTicks, intervals.length);
    let spend = 0;
    let exposure = 0;
    for (let i = 0; i < use; i++) {
      const x = intervals[i] as { spend: number; exposure: number };
      spend += x.spend;
      exposure += x.exposure;
    }
    return exposure > 0 ? spend / exposure : 0;
  }

  /** Fewer than half of the intervals before the latest spendless run carry spend. */
  private sparse(newestFirst: readonly { spend: number }[]): boolean {
    if (this.maxTicks <= this.windowTicks) return false;
    let i = 0;
    while (i < newestFirst.length && (newestFirst[i] as { spend: number }).spend === 0) i++;
    let withSpend = 0;
    for (let k = i; k < newestFirst.length; k++)
      if ((newestFirst[k] as { spend: number }).spend > 0) withSpend++;
    const n = newestFirst.length - i;
    return n > 0 && withSpend * 2 < n;
  }
}

/**
 * The own demand figure used in the weight: the minimum of the figures this region published
 * within the window (so no peer can hold a smaller one; see the module comment).
 */
export class PublishedMinimum {
  private readonly values: { atMs: number; value: number }[] = [];

  constructor(private readonly windowMs: number) {}

  /** Records a figure as published at `atMs`. */
  publish(atMs: number, value: number): void {
    this.values.push({ atMs, value });
    this.trim(atMs);
  }

  /** The minimum over the window ending at `nowMs`, or undefined when none was published in it. */
  min(nowMs: number): number | undefined {
    this.trim(nowMs);
    let m: number | undefined;
    for (const v of this.values) if (m === undefined || v.value < m) m = v.value;
    return m;
  }

  private trim(nowMs: number): void {
    // A figure is superseded everywhere once a later one was published at least a window ago
    // (every peer has the later one by then); until then a peer may still hold it.
    while (this.values.length > 1 && (this.values[1] as { atMs: number }).atMs <= nowMs - this.windowMs) {
      this.values.shift();
    }
  }
}
