/**
 * What a simulation run takes and returns (both engines: `sim/runner.ts`,
 * `sim/regions/engine.ts`): options, per plan-day results, per region parts.
 */

import type { ResolvedPlan } from '../../shared/budget/model.js';
import type { TargetCurve } from '../../shared/budget/pacing.js';
import type { DeliveryCounts } from '../../shared/pacing/delivery-counts.js';
import type { RedisClient } from '../../shared/redis/connect.js';
import type { ManualClock } from '../../shared/time/clock.js';
import type { SimRegion } from '../regions/region.js';
import type { Scenario } from '../scenario.js';
import type { StrategyName } from '../strategies.js';
import type { PhaseTimes } from './overlap.js';

/** One plan-day's outcome. */
export interface PlanDayResult {
  /** `a:<account>/account`, `c:<campaign>/campaign`, `c:<campaign>/arm:<id>`. */
  readonly plan: string;
  readonly level: 'account' | 'campaign' | 'arm';
  readonly campaignId: string | undefined;
  readonly day: string;
  /** Scored (not a history day). */
  readonly scored: boolean;
  /** Budget in force at the end of the day. */
  readonly budgetMicros: number;
  /** Spend booked by the tracker for bids of that day (duplicates excluded). */
  readonly spentMicros: number;
  /** Confirmed spend in the live counters at the end (equals spentMicros on a clean run). */
  readonly countersMicros: number;
  /** What the exchange charged (above spent only when win notices were lost). */
  readonly chargedMicros: number;
  /**
   * A dayparted plan's (only): what the exchange charged for impressions of bids made while its
   * windows were closed (docs/spend.md, "Dayparting": 0 by the guard's rule).
   */
  readonly outsideWindowMicros?: number;
  readonly impressions: number;
  /**
   * Bids of the plan-day that lost to another of our own bids (the portfolio won that auction: every
   * eligible campaign bids in it) and to the market (its competing bid or the floor); with
   * `impressions`, every bid placed. Diagnostics: left out of the run digest (sim/digest.ts). A
   * region's row of a multi-region run leaves them out (its combined row carries them).
   */
  readonly lostToOwn?: number;
  readonly lostToMarket?: number;
  readonly clicks: number;
  /** Max / RMS over the day's minutes of |spent − E(t)| / budget, E = the published curve. */
  readonly maxDeviation: number;
  readonly rmsDeviation: number;
  /** Max over the day's minutes of (spent − budget in force), micros. */
  readonly maxOverCapMicros: number;
  /**
   * Max |spent − E(t)| / budget over the day's minutes from one tick after the plan's last budget
   * change of the day (how closely spend follows the curve the new budget gave); only on a day
   * its budget changed, and only from the single-region engine.
   */
  readonly maxDeviationAfterChange?: number;
  /**
   * Max over the day's minutes of (spent − E*(t)) / budget, at least 0: how far the plan ran
   * ahead of the traffic-following ideal curve E* (sim/ideal.ts), whatever curve was published.
   */
  readonly maxAhead: number;
  /** Minutes with allowance E(t) − spent > 0. */
  readonly minutesAlive: number;
  /**
   * Every 10 minutes (`seriesEveryMs`): [epoch ms, spent, E(t), throttle, bid multiplier] as the
   * monitor read them (−1, −1: nothing fresh published) — charts and diagnostics; only when
   * `series` was asked.
   */
  readonly series?: readonly (readonly [number, number, number, number, number])[];
}

/** One strategy's run of a scenario. */
export interface StrategyRun {
  readonly strategy: StrategyName;
  /** One result per plan and scored local day. */
  readonly plans: PlanDayResult[];
  /** Ad requests the market sent over the run (bidding part of the span). */
  readonly requests: number;
  /** Auctions we took part in (at least one of our bids). */
  readonly auctions: number;
  /** Bids placed: a request with several eligible campaigns bids once per campaign. */
  readonly bids: number;
  /** Win and loss notices delivered to the spend path. */
  readonly notices: number;
  /** The guards' lease/settle calls to Redis (each one Lua script). */
  readonly leaseCalls: number;
  /** Pacer ticks run. */
  readonly ticks: number;
  /** Ticks that published parameters. */
  readonly publishedTicks: number;
  /** Claims and publish batches refused by the fence (an old leader after a takeover). */
  readonly fencedWritesRejected: number;
  /** Audit-stream check: after each takeover, no write of an older publisher landed. */
  readonly staleWritesAccepted: number;
  /** Ticks that reloaded the controllers' state from Redis (a takeover). */
  readonly stateReloads: number;
  /** Wall-clock time of the run, ms. */
  readonly wallMs: number;
  /** CPU time of this process during the run (user + system), ms. */
  readonly cpuMs: number;
  /** CPU time of redis-server during the run (INFO cpu), ms. */
  readonly redisCpuMs: number;
  /** Time per phase (only with {@link RunOptions.phases}). */
  readonly phases?: PhaseTimes;
  /**
   * The delivery bands the publishing pacer counted each minute (what the `PlansBehind` metrics
   * carry; one region), oldest first: the input of the delivery alarms (`alarmFires`).
   */
  readonly deliveryMinutes?: readonly { readonly atMs: number; readonly counts: DeliveryCounts }[];
  /** Several regions (`sim/regions/`): each region's part; `plans` are then the combined figures. */
  readonly regions?: readonly RegionRun[];
  /** The faults injected, a line each with its instant. */
  readonly faults: readonly string[];
  /** Guard and reader background errors (a clean run has none). */
  readonly errors: readonly string[];
}

/** One region's part of a multi-region run (`sim/regions/engine.ts`). */
export interface RegionRun {
  readonly region: string;
  /**
   * The region's own spend per plan-day (its wins); `maxDeviation` / `rmsDeviation` against the
   * curve its own pacer published, over the plan's whole budget, minutes it was up.
   */
  readonly plans: PlanDayResult[];
  /** Requests routed to the region, and its ad servers' bids. */
  readonly requests: number;
  readonly bids: number;
  readonly leaseCalls: number;
  /** Lease calls its allocation (not E) cut short, and no-budget answers that caused. */
  readonly allocationHolds: number;
  readonly allocationRefusals: number;
  readonly ticks: number;
  readonly publishedTicks: number;
  /** As the home: micros granted and reclaimed over the run, reclaims made. */
  readonly grantedMicros: number;
  readonly reclaimedMicros: number;
  readonly reclaims: number;
  /** Oldest authority entry this region followed, ms (the AllocationAuthorityAge alarm's figure). */
  readonly authorityAgeMaxMs: number;
  /** Minutes the region was lost. */
  readonly lostMinutes: number;
}

/** Options of `runStrategy` (sim/runner.ts). */
export interface RunOptions {
  readonly redis: RedisClient;
  readonly clock: ManualClock;
  readonly scenario: Scenario;
  readonly strategy: StrategyName;
  /** Seed of the run (market and bidding draws). @default scenario.seed */
  readonly seed?: number;
  /** Keep 10-minute series per plan-day (charts). @default false */
  readonly series?: boolean;
  /** Interval of those series (diagnostics may want every minute). @default 600_000 */
  readonly seriesEveryMs?: number;
  readonly onProgress?: (line: string) => void;
  /** Stop bidding at this instant instead of the scenario's end (short determinism tests). */
  readonly untilMs?: number;
  /** Measure wall and CPU time per phase of the simulated second (benchmarks). @default false */
  readonly phases?: boolean;
  /**
   * Write the guards' lease calls and the tracker's scripts while the second's loops still run
   * ({@link LeaseOverlap}), and await the notices' replies after the request loop; `false` writes
   * them after each loop and awaits the notices before the request loop (Redis idles while the
   * loop runs). The outcome is the same either way (the determinism test compares them).
   * @default true
   */
  readonly overlap?: boolean;
  /**
   * Called at every simulated second while bidding, once the second's tick, notices and the ad
   * servers' refresh are in and before its requests (tests: what the guards see and hold at chosen
   * instants). May read Redis; a run with a probe is not comparable with one without.
   */
  readonly probe?: (view: RunProbe) => Promise<void> | void;
  /**
   * Run every leader tick in a new pacer process (the next lease epoch, no gap): each tick is a
   * takeover, so every plan steps from the state and forecast decoded from what the last publish
   * stored, with the budgets a cold process loads — the encodings must carry everything the
   * controller needs. A leader change is otherwise a fault (`leader-killed`). @default false
   */
  readonly takeoverEveryTick?: boolean;
}

/** What {@link RunOptions.probe} sees. */
export interface RunProbe {
  readonly now: number;
  readonly redis: RedisClient;
  /** Every plan of the run's active campaigns (account, campaign, arm plans), as last resolved. */
  readonly plans: readonly ResolvedPlan[];
  /** The ad servers' guard curves (`publishedCurve` of each server's reader), as the guards use them. */
  readonly curves: readonly TargetCurve[];
}

/** Options of `runRegions` (sim/regions/engine.ts). */
export interface RegionsRunOptions {
  /** One empty Redis per scenario region, in the scenario's order. */
  readonly redis: readonly RedisClient[];
  readonly clock: ManualClock;
  readonly scenario: Scenario;
  readonly strategy: StrategyName;
  /** @default scenario.seed */
  readonly seed?: number;
  /** Keep 10-minute series of the combined figures (charts). @default false */
  readonly series?: boolean;
  readonly onProgress?: (line: string) => void;
  /** Stop bidding at this instant instead of the scenario's end (short tests). */
  readonly untilMs?: number;
  /**
   * Called every simulated minute, after the sample, with the regions (tests and diagnostics:
   * their caches, what their pacers published).
   */
  readonly onMinute?: (nowMs: number, regions: readonly RegionProbe[]) => Promise<void> | void;
}

/** What {@link RegionsRunOptions.onMinute} sees of a region. */
export interface RegionProbe {
  readonly name: string;
  readonly up: boolean;
  readonly redis: RedisClient;
  /** The scorer's reader of the region's published parameters (fresh this minute when up). */
  readonly published: SimRegion['monitor'];
}
