/**
 * One campaign spent from several local regions at full speed (spend-all-now: every region's
 * ad servers bid on every request they get, as fast as their guards allow), on a manual clock:
 * each region with its real pacer (wired as the pacer function), its PacingReader, BudgetGuard and
 * the track-spend objects its functions build (`spendRuntimeFromEnv`: the replicated ledger, the
 * outbox, live counters), global tables replicated at a lag. Faults are hooks per tick (a region
 * lost, a region's ad servers and pacer killed). Allocations `strict` or `off` (the share rule
 * alone), so each test shows its bound also fails without them.
 */
import { BudgetRepository } from '../../../shared/budget/repository.js';
import { dayWindow } from '../../../shared/budget/time-zone.js';
import type { PacingController } from '../../../shared/pacing/controller/api.js';
import { createPacingController } from '../../../shared/pacing/controller/index.js';
import { PacingReader, publishedCurve } from '../../../shared/pacing/reader.js';
import type { AuthorityTickOutcome } from '../../../shared/pacing/regions/allocation-authority.js';
import type { AllocationConfig } from '../../../shared/pacing/regions/allocation-config.js';
import { prng } from '../../../shared/random/prng.js';
import { BudgetGuard } from '../../../shared/spend/guard.js';
import { planDayKeys } from '../../../shared/spend/keys.js';
import { readPlanDay } from '../../../shared/spend/live-counters.js';
import { type SpendRuntime, spendRuntimeFromEnv } from '../../../shared/spend/runtime.js';
import { ManualClock } from '../../../shared/time/clock.js';
import { accountsInShard } from '../pacing/support.js';
import { type RegionalInstance, regionalInstance, startRegions, type TwoRegions } from './support.js';

export const TICK = 10_000;
const SHARD = 1;
const TZ = 'America/New_York';
/** Noon in New York. */
export const T0 = Date.UTC(2026, 10, 24, 17, 0, 0);
export const CAMPAIGN = 'fast-c';

/** A region of the run. */
export interface RunRegion {
  readonly name: string;
  readonly instance: RegionalInstance;
  readonly guard: BudgetGuard;
  readonly reader: PacingReader;
  readonly spend: SpendRuntime;
  /** Ad servers and pacer running (a killed region's track-spend still books its notices). */
  bidding: boolean;
  pacing: boolean;
  /** Win notices not yet applied: [due at, event]. */
  readonly notices: { at: number; bidId: string; bidAt: number; price: number }[];
}

/** Options of {@link fullSpeedRun}. */
export interface FullSpeedOptions {
  readonly names: readonly string[];
  readonly mode: 'strict' | 'off';
  readonly budgetMicros: number;
  readonly priceMicros: number;
  /** Bid requests per second each region gets (all bid: spend-all-now). */
  readonly bidsPerSecond: Readonly<Record<string, number>>;
  readonly ticks: number;
  readonly lagMs?: number;
  /** In-flight lifetime T and slot of guards and track-spend. @default 10 min / 1 min */
  readonly inFlight?: { readonly ttlMs: number; readonly slotMs: number };
  /** The guards' lease-ahead. @default T / 4 */
  readonly leaseAheadMs?: number;
  /** Delay of a bid's win notice. @default 200 ms */
  readonly noticeDelayMs?: (random: () => number) => number;
  readonly allocations?: Partial<Omit<AllocationConfig, 'regions' | 'mode'>>;
  /** Faults: called at the start of each tick, after the clock moved. */
  readonly onTick?: (i: number, run: FullSpeedContext) => Promise<void>;
}

/** What the hooks and the caller see. */
export interface FullSpeedContext {
  readonly two: TwoRegions;
  readonly clock: ManualClock;
  readonly regions: ReadonlyMap<string, RunRegion>;
  /** Every authority outcome, with its tick and region. */
  readonly authority: { tick: number; region: string; outcome: AuthorityTickOutcome }[];
}

/** What a run measured. */
export interface FullSpeedResult {
  readonly confirmed: Readonly<Record<string, number>>;
  readonly combined: number;
  readonly context: FullSpeedContext;
}

const controller = createPacingController() as PacingController<unknown, unknown>;

/** Runs the campaign (module comment); the caller stops `result.context.two`. */
export async function fullSpeedRun(o: FullSpeedOptions): Promise<FullSpeedResult> {
  const clock = new ManualClock(T0 - 60_000);
  const two = await startRegions(clock, o.lagMs ?? 500, o.names);
  for (const r of Object.values(two.redis)) r.on('error', () => {});
  const first = two.regions[o.names[0] as string] as NonNullable<TwoRegions['regions'][string]>;
  const shards = first.description.settings.pacer.shards;
  const [accountId] = accountsInShard(SHARD, shards, 1, 'fast') as [string];
  const repo = new BudgetRepository({
    client: first.dynamodb,
    tableName: first.tableName('budgets'),
    pacerShards: shards,
  });
  // Written on the run's clock: the plan's creation is the regions' default lease base.
  const now = clock.now();
  await repo.putAccount({ accountId, name: accountId, timeZone: TZ, currency: 'USD' }, 'upsert', now);
  await repo.putCampaign(
    { campaignId: CAMPAIGN, accountId, name: CAMPAIGN, status: 'active' },
    'upsert',
    now,
  );
  await repo.putPlan(
    {
      level: 'campaign',
      accountId,
      campaignId: CAMPAIGN,
      dailyBudgetMicros: o.budgetMicros,
      pacingMode: 'asap',
    },
    'upsert',
    now,
  );
  await two.link.flush();
  const inFlight = o.inFlight ?? { ttlMs: 600_000, slotMs: 60_000 };
  const regions = new Map<string, RunRegion>();
  for (const name of o.names) {
    const region = two.regions[name] as NonNullable<TwoRegions['regions'][string]>;
    const spend = spendRuntimeFromEnv({
      dynamodb: region.dynamodb,
      clock,
      onRedisError: () => {},
      env: {
        ...region.functionEnv('trackSpend'),
        IN_FLIGHT_TTL_MS: String(inFlight.ttlMs),
        IN_FLIGHT_SLOT_MS: String(inFlight.slotMs),
      },
    });
    const reader = new PacingReader({ redis: spend.redis, clock, shards });
    const guard = new BudgetGuard({
      redis: spend.redis,
      clock,
      inFlight,
      initPlanDay: (plan, day) => spend.reconciler.reconcile(plan, day),
      curve: publishedCurve(reader),
      minFloatMicros: 2 * o.priceMicros,
      ...(o.leaseAheadMs === undefined ? {} : { leaseAheadMs: o.leaseAheadMs }),
      allocations: o.mode,
    });
    const budgets = await spend.budgets.getCampaignBudgets(CAMPAIGN);
    if (!budgets) throw new Error(`${name}: the campaign did not replicate`);
    guard.setBudgets(budgets);
    const instance = regionalInstance({
      two,
      region: name,
      shard: SHARD,
      instance: 0,
      clock,
      controller,
      tickMs: TICK,
      allocations: {
        mode: o.mode,
        inFlightTtlMs: inFlight.ttlMs,
        maxLeaseAheadMs: o.leaseAheadMs ?? Math.floor(inFlight.ttlMs / 4),
        ...o.allocations,
      },
    });
    regions.set(name, { name, instance, guard, reader, spend, bidding: true, pacing: true, notices: [] });
  }
  clock.set(T0);
  const context: FullSpeedContext = { two, clock, regions, authority: [] };
  const random = prng(11);
  const delay = o.noticeDelayMs ?? (() => 200);
  let bidNo = 0;
  const applyDue = async (r: RunRegion, upTo: number) => {
    const due = r.notices.filter((n) => n.at <= upTo);
    if (due.length === 0) return;
    r.notices.splice(0, r.notices.length, ...r.notices.filter((n) => n.at > upTo));
    await Promise.all(
      due.map((n) =>
        r.spend.tracker.apply({
          v: 1,
          type: 'win',
          bidId: n.bidId,
          campaignId: CAMPAIGN,
          bidAt: n.bidAt,
          at: n.at,
          bidPriceMicros: n.price,
          clearingPriceMicros: n.price,
        }),
      ),
    );
  };
  for (let i = 0; i < o.ticks; i++) {
    const tickStart = T0 + i * TICK;
    clock.set(tickStart);
    await o.onTick?.(i, context);
    await Promise.all(
      [...regions.values()]
        .filter((r) => r.pacing)
        .map(async (r) => {
          const out = await r.instance.tick(tickStart / TICK);
          if (out.authority) context.authority.push({ tick: i, region: r.name, outcome: out.authority });
        }),
    );
    await two.link.deliverDue();
    for (const r of regions.values())
      if (r.bidding) await r.reader.prefetch([{ accountId, campaignId: CAMPAIGN }]);
    for (let sec = 0; sec < TICK / 1000; sec++) {
      clock.set(tickStart + sec * 1_000 + 500);
      for (const r of regions.values()) {
        if (!r.bidding) continue;
        for (let q = 0; q < (o.bidsPerSecond[r.name] ?? 0); q++) {
          // Requests spread over the second: the guard's background lease runs between them.
          await r.guard.idle();
          if (r.guard.decide({ campaignId: CAMPAIGN, priceMicros: o.priceMicros }) !== 'bid') continue;
          const at = clock.now();
          r.notices.push({
            at: at + delay(random),
            bidId: `${r.name}-${bidNo++}`,
            bidAt: at,
            price: o.priceMicros,
          });
        }
        await r.guard.idle();
      }
      for (const r of regions.values()) await applyDue(r, clock.now());
      await two.link.deliverDue();
    }
    for (const r of regions.values()) if (r.bidding) await r.guard.maintain();
  }
  // Every notice still due is booked (a killed region's track-spend books its in-flight wins).
  clock.set(T0 + o.ticks * TICK + inFlight.ttlMs);
  for (const r of regions.values()) await applyDue(r, Number.POSITIVE_INFINITY);
  const day = dayWindow(T0, TZ);
  const key = planDayKeys({ scope: `c:${CAMPAIGN}`, planId: 'campaign' }, day.day).state;
  const confirmed: Record<string, number> = {};
  let combined = 0;
  for (const r of regions.values()) {
    const live = await readPlanDay(r.spend.redis, key, day.endMs - 1);
    confirmed[r.name] = live.confirmedMicros;
    combined += live.confirmedMicros;
  }
  return { confirmed, combined, context };
}

/** Stops a run's ad servers, pacers and regions. */
export async function stopRun(result: FullSpeedResult | undefined): Promise<void> {
  if (!result) return;
  for (const r of result.context.regions.values()) {
    r.instance.close();
    r.spend.redis.disconnect();
  }
  await result.context.two.stop();
}

/** The plan-day's state key (the caller's reads of allocation fields). */
export function campaignStateKey(): string {
  return planDayKeys({ scope: `c:${CAMPAIGN}`, planId: 'campaign' }, dayWindow(T0, TZ).day).state;
}
