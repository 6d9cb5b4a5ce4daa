/**
 * The region side of strict allocations (docs/pacing.md, "Many regions"), run by the pacer
 * publishing into a region's cache, every tick after its publish: per plan-day, the cap from the
 * authority entry of the plan's home and fence (`regionStep`), written into the plan-day's state
 * hash when it changed (one `spendAlloc` script call: merge, and lower when the region holds more
 * than it expects to need), then the mailbox entry the caller writes with the region's summary —
 * after Redis, so a crash in between only under-reports a release (safe: the home then believes
 * the region holds more).
 *
 * With allocations off (one region) it only removes a cap left in a state hash (a deployment back
 * to one region), so no stale cap stops the guards.
 */
import type { ResolvedPlan } from '../../budget/model.js';
import type { DayWindow } from '../../budget/time-zone.js';
import type { RedisClient } from '../../redis/connect.js';
import { type AllocationScripts, allocationScripts } from '../../spend/allocation-script.js';
import { DEFAULT_MEMORY_RETENTION_MS, keepFor } from '../../spend/reconcile.js';
import type { AllocationFields, PlanSpendSnapshot } from '../types.js';
import { type AllocationConfig, fenceOf, homeOf } from './allocation-config.js';
import { regionStep } from './allocations.js';
import type { RegionSpendView } from './region-spend-items.js';

/** One plan-day as the allocation step needs it (the pacer's plan list entries fit). */
export interface AllocationPlanDay {
  /** `<scope>:<planId>`. */
  readonly field: string;
  readonly plan: ResolvedPlan;
  readonly day: DayWindow;
  /** The plan-day's state hash key. */
  readonly spendKey: string;
}

/** Inputs of one tick. */
export interface AllocationTickInput {
  readonly plans: readonly AllocationPlanDay[];
  readonly spend: readonly PlanSpendSnapshot[];
  /** The region's published E(t) of plan i at `atMs`. */
  readonly expectedAt: (i: number, atMs: number) => number;
  /** Measured full-speed demand of plan i (undefined until measured). */
  readonly demands: readonly (number | undefined)[];
  readonly nowMs: number;
  readonly view: RegionSpendView;
}

/** A mailbox entry as written in the region item's `alloc`: [rel, want, seenG, seenX, ae, fence, home]. */
export type MailboxTuple = readonly [number, number, number, number, number, number, string];

/** What one tick did. */
export interface AllocationTickOutcome {
  /** Mailbox entries by plan-day key (absent: nothing known to report for it). */
  readonly mailboxes: ReadonlyMap<string, MailboxTuple>;
  /** Script calls made / failed; micros released. */
  readonly writes: number;
  readonly failed: number;
  readonly releasedMicros: number;
  /** Stale caps removed (allocations off). */
  readonly cleared: number;
  /** Age of the oldest authority this region follows, ms (the AllocationAuthorityAgeSeconds metric). */
  readonly authorityAgeMs?: number;
  readonly error?: string;
}

/** Options of {@link RegionAllocations}. */
export interface RegionAllocationsOptions {
  readonly redis: RedisClient;
  /** The region whose cache (and allocation) this pacer computes. */
  readonly cacheRegion: string;
  readonly config: AllocationConfig;
  /** @default DEFAULT_MEMORY_RETENTION_MS */
  readonly memoryRetentionMs?: number;
  /** Script calls in flight at once. @default 256 */
  readonly concurrency?: number;
  /** The scripts (tests: a stand-in). @default allocationScripts(redis) */
  readonly scripts?: AllocationScripts;
}

/** The region step of one cache region (module comment). */
export class RegionAllocations {
  private readonly scripts: AllocationScripts;
  /** Plan-day keys this process wrote fields for (a missing hash later is a reset, not a start). */
  private readonly written = new Set<string>();
  /** When this process first found no authority record of a home it follows. */
  private readonly missingSince = new Map<string, number>();

  constructor(private readonly options: RegionAllocationsOptions) {
    this.scripts = options.scripts ?? allocationScripts(options.redis);
  }

  /** The mode this region runs in. */
  get mode(): AllocationConfig['mode'] {
    return this.options.config.mode;
  }

  /** Runs the tick's step for every plan-day (never throws: failures are counted and reported). */
  async apply(input: AllocationTickInput): Promise<AllocationTickOutcome> {
    if (this.options.config.mode === 'off') return this.clearStale(input);
    const { config, cacheRegion } = this.options;
    const { nowMs, view } = input;
    const mailboxes = new Map<string, MailboxTuple>();
    const homes = new Set<string>();
    let writes = 0;
    let failed = 0;
    let released = 0;
    let error: string | undefined;
    const jobs: (() => Promise<void>)[] = [];
    for (let i = 0; i < input.plans.length; i++) {
      const p = input.plans[i] as AllocationPlanDay;
      const s = input.spend[i] as PlanSpendSnapshot;
      const key = `${p.field}|${p.day.day}`;
      const home = homeOf(p.plan, config);
      const fence = fenceOf(p.plan);
      homes.add(home);
      const found = view.authorities.get(home)?.plans.get(key);
      const entry = found?.fence === fence ? found : undefined;
      const own = view.regions.get(cacheRegion)?.plans.get(key)?.mailbox;
      const fields: AllocationFields = s.alloc ?? {};
      const decision = regionStep(
        {
          nowMs,
          budgetMicros: p.plan.dailyBudgetMicros,
          region: cacheRegion,
          ...(entry ? { entry } : {}),
          ...(own ? { ownMailbox: own } : {}),
          fields,
          spentMicros: s.confirmedMicros + s.inFlightMicros + s.leasedMicros,
          ...(input.demands[i] === undefined ? {} : { demandMicrosPerSec: input.demands[i] }),
          expectedAtHorizonMicros: input.expectedAt(i, nowMs + config.horizonMs),
          dayStartMs: p.day.startMs,
          ...(p.plan.createdAt === undefined ? {} : { createdAtMs: p.plan.createdAt }),
        },
        config,
      );
      const report = (f: AllocationFields) => {
        if (f.ag === undefined || f.ar === undefined || f.ax === undefined || f.ae === undefined) return;
        mailboxes.set(key, [f.ar, decision.want, f.ag, f.ax, f.ae, fence, home]);
      };
      if (!decision.write && decision.lowerTo === undefined) {
        report(fields);
        continue;
      }
      const first = !own && !this.written.has(key);
      jobs.push(async () => {
        writes++;
        try {
          const w = await this.scripts.write(p.spendKey, {
            liveAtMs: nowMs - config.skewMarginMs,
            ...decision.target,
            ...(decision.lowerTo === undefined ? {} : { lowerTo: decision.lowerTo }),
            first,
            keepMs: keepFor(
              p.day.endMs,
              nowMs,
              this.options.memoryRetentionMs ?? DEFAULT_MEMORY_RETENTION_MS,
            ),
          });
          this.written.add(key);
          released += w.released;
          report(w);
        } catch (e) {
          // Whether it landed is unknown: report what was read (a release it may have made is
          // then under-reported, which is safe).
          failed++;
          error ??= (e as Error).message;
          report(fields);
        }
      });
    }
    await runLimited(jobs, this.options.concurrency ?? 256);
    this.forget(input.plans);
    return {
      mailboxes,
      writes,
      failed,
      releasedMicros: released,
      cleared: 0,
      ...this.authorityAge(homes, view, nowMs),
      ...(error ? { error } : {}),
    };
  }

  private authorityAge(
    homes: ReadonlySet<string>,
    view: RegionSpendView,
    nowMs: number,
  ): { authorityAgeMs?: number } {
    let age: number | undefined;
    for (const home of homes) {
      const record = view.authorities.get(home);
      let since = record?.atMs;
      if (since === undefined) {
        since = this.missingSince.get(home) ?? nowMs;
        this.missingSince.set(home, since);
      } else this.missingSince.delete(home);
      age = Math.max(age ?? 0, nowMs - since);
    }
    return age === undefined ? {} : { authorityAgeMs: age };
  }

  private async clearStale(input: AllocationTickInput): Promise<AllocationTickOutcome> {
    const jobs: (() => Promise<void>)[] = [];
    let cleared = 0;
    let failed = 0;
    let error: string | undefined;
    for (let i = 0; i < input.plans.length; i++) {
      if ((input.spend[i] as PlanSpendSnapshot).alloc?.a === undefined) continue;
      const key = (input.plans[i] as AllocationPlanDay).spendKey;
      jobs.push(async () => {
        try {
          await this.scripts.clear(key);
          cleared++;
        } catch (e) {
          failed++;
          error ??= (e as Error).message;
        }
      });
    }
    await runLimited(jobs, this.options.concurrency ?? 256);
    return {
      mailboxes: new Map(),
      writes: 0,
      failed,
      releasedMicros: 0,
      cleared,
      ...(error ? { error } : {}),
    };
  }

  /** Drops the memory of ended plan-days once it outgrows the live ones. */
  private forget(plans: readonly AllocationPlanDay[]): void {
    if (this.written.size <= plans.length * 2) return;
    const live = new Set(plans.map((p) => `${p.field}|${p.day.day}`));
    for (const key of this.written) if (!live.has(key)) this.written.delete(key);
  }
}

/** Runs jobs with at most `limit` in flight. */
async function runLimited(jobs: readonly (() => Promise<void>)[], limit: number): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < jobs.length) await (jobs[next++] as () => Promise<void>)();
  };
  await Promise.all(Array.from({ length: Math.min(limit, jobs.length) }, worker));
}
