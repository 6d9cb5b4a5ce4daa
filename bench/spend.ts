/**
 * `npm run bench -- spend [--seconds 3] [--events 4000]`: the budget guard and spend tracking
 * against a real redis-server (and dynalite for the ledger), beside the raw-Redis ceiling
 * measured in the same run.
 *
 * - decisionsPerSec: BudgetGuard.decide() calls per second in this one process, each bid checked
 *   against 3 plans (account, campaign, experiment arm), lease calls running in the background;
 * - redisOpsPer1000Bids: top-level Redis commands (round trips: EVALSHA, EVAL after NOSCRIPT, …)
 *   the server executed during the guard phase (INFO commandstats delta) per 1,000 `bid`
 *   decisions; the calls scripts make inside Redis are reported separately;
 * - trackSpendEventsPerSec: bid / win / loss events through SpendTracker as track-spend wires it
 *   (outbox intent + ledger conditional write + intent delete on dynalite, one Lua per plan),
 *   batches of 200 handled concurrently as the Lambda does;
 * - scriptCalls: the lease script called 200,000 times (batches of 16 per event-loop turn, 4,096 in
 *   flight) over each transport of `spendScripts` — `raw` (shared/redis/resp/script-caller.ts, what the
 *   guard and track-spend use) and `client` (ioredis `defineCommand`) — this process's CPU (user +
 *   system) and wall time per call;
 * - redisCeilingOpsPerSec: pipelined INCRBY ceiling (bench/ceiling.ts).
 *
 * The workload's parameters (budgets, prices, float fraction) are printed with the figures: ops
 * per 1,000 bids scale with price / float size.
 */
import type { Redis } from 'ioredis';
import { startDynalite } from '../local/emulators/aws.js';
import { startRedis } from '../local/emulators/redis.js';
import { provisionTables } from '../local/region.js';
import { dynamoDbClient } from '../shared/aws/clients.js';
import { type BudgetPlan, type CampaignBudgets, campaignBudgets } from '../shared/budget/model.js';
import { connectRedis, type RedisClient } from '../shared/redis/connect.js';
import { physicalName, regionResources } from '../shared/region/resources.js';
import { encodeSpendEvent, type SpendEvent } from '../shared/spend/events.js';
import { BudgetGuard, type GuardBid } from '../shared/spend/guard.js';
import { SpendLedger } from '../shared/spend/ledger.js';
import { type ScriptTransport, spendScripts } from '../shared/spend/live-counters.js';
import { SpendOutbox } from '../shared/spend/outbox.js';
import { Reconciler } from '../shared/spend/reconcile.js';
import { SpendTracker } from '../shared/spend/tracker.js';
import { systemClock } from '../shared/time/clock.js';
import { measureCeiling } from './ceiling.js';

function arg(args: string[], name: string, fallback: number): number {
  const i = args.indexOf(`--${name}`);
  const v = i >= 0 ? Number(args[i + 1]) : fallback;
  if (!Number.isFinite(v) || v <= 0) throw new RangeError(`--${name} must be a positive number`);
  return v;
}

/** Commands the spend scripts run *inside* Redis (counted by commandstats, but no round trips). */
const SCRIPT_INTERNAL = new Set([
  'hmget',
  'hget',
  'hincrby',
  'hgetall',
  'hdel',
  'pexpire',
  'hset',
  'hexists',
  'del',
  'rename',
  'exists',
]);

/** Server-side call counts: top-level commands (round trips) and everything incl. script internals. */
async function commandCalls(client: RedisClient): Promise<{ topLevel: number; all: number }> {
  const info = await client.info('commandstats');
  let topLevel = 0;
  let all = 0;
  for (const m of info.matchAll(/cmdstat_([a-z|]+):calls=(\d+)/g)) {
    const calls = Number(m[2]);
    all += calls;
    if (!SCRIPT_INTERNAL.has(m[1] as string)) topLevel += calls;
  }
  return { topLevel, all };
}

const CAMPAIGNS = 20;
const ARMS = ['A', 'B'];
const BUDGETS = { accountMicros: 100_000_000_000, campaignMicros: 10_000_000_000, armMicros: 5_000_000_000 };
const PRICE_RANGE = [500, 5000] as const;

function workloadBudgets(): CampaignBudgets[] {
  const account = { accountId: 'bench-acc', name: 'bench', timeZone: 'UTC', currency: 'USD' };
  return Array.from({ length: CAMPAIGNS }, (_, i) => {
    const campaignId = `bench-c${i}`;
    const plans: BudgetPlan[] = [
      {
        level: 'account',
        accountId: account.accountId,
        dailyBudgetMicros: BUDGETS.accountMicros,
        pacingMode: 'asap',
      },
      {
        level: 'campaign',
        accountId: account.accountId,
        campaignId,
        dailyBudgetMicros: BUDGETS.campaignMicros,
        pacingMode: 'asap',
      },
      ...ARMS.map(
        (armId): BudgetPlan => ({
          level: 'arm',
          accountId: account.accountId,
          campaignId,
          armId,
          dailyBudgetMicros: BUDGETS.armMicros,
          pacingMode: 'asap',
        }),
      ),
    ];
    return campaignBudgets(
      account,
      { campaignId, accountId: account.accountId, name: campaignId, status: 'active' },
      plans,
    );
  });
}

/** Caller CPU and wall µs per lease call over one transport (see the module comment). */
async function scriptCallCost(
  redis: RedisClient,
  transport: ScriptTransport,
  calls: number,
): Promise<{ cpuMicrosPerCall: number; wallMicrosPerCall: number }> {
  const scripts = spendScripts(redis, transport);
  const plans = 1000;
  const now = Date.now();
  const slot = Math.floor(now / 60_000);
  for (let p = 0; p < plans; p++)
    await redis.hset(`bench:{${transport}${p}}:s`, { r: 'e1', c: '0', q: '60000', t: '600000' });
  const args = [
    now,
    'e1',
    5_000_000,
    20_000,
    5_000,
    1000,
    86_400_000,
    150_000,
    0,
    '0',
    0,
    0,
    `l:${slot}`,
    -5,
    `f:${slot}`,
    7,
  ];
  await scripts.lease(`bench:{${transport}0}:s`, args);
  const cpu0 = process.cpuUsage();
  const wall0 = performance.now();
  let inFlight: Promise<unknown>[] = [];
  for (let i = 0; i < calls; i++) {
    inFlight.push(scripts.lease(`bench:{${transport}${i % plans}}:s`, args));
    // As the guard issues them: a few per turn of the request loop, written between turns.
    if (i % 16 === 15) await new Promise<void>((resolve) => process.nextTick(resolve));
    if (inFlight.length === 4096) {
      await Promise.all(inFlight);
      inFlight = [];
    }
  }
  await Promise.all(inFlight);
  const wall = performance.now() - wall0;
  const cpu = process.cpuUsage(cpu0);
  return {
    cpuMicrosPerCall: +((cpu.user + cpu.system) / calls).toFixed(2),
    wallMicrosPerCall: +((wall * 1000) / calls).toFixed(2),
  };
}

/** Pre-built bids, cycled: the loops measure decide() and the tracker, not the random generator. */
function workloadBids(): GuardBid[] {
  const bids: GuardBid[] = [];
  let seed = 12345;
  const random = () => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed / 2147483648;
  };
  for (let i = 0; i < 8192; i++) {
    bids.push({
      campaignId: `bench-c${Math.floor(random() * CAMPAIGNS)}`,
      armId: ARMS[Math.floor(random() * ARMS.length)] as string,
      priceMicros: Math.floor(PRICE_RANGE[0] + random() * (PRICE_RANGE[1] - PRICE_RANGE[0])),
    });
  }
  return bids;
}

/** The guard for `seconds`: decisions and bids, and the Redis commands and lease calls they cost. */
async function guardPhase(redis: RedisClient, bids: readonly GuardBid[], seconds: number) {
  const reconciler = new Reconciler({
    redis,
    clock: systemClock,
    // The guard only needs the ledger to initialise a plan-day; a new day's ledger is empty.
    ledger: { entries: async () => [], markPlanDayStarted: async () => true },
    campaignsOfAccount: async () => workloadBudgets().map((b) => b.campaign.campaignId),
  });
  const errors: unknown[] = [];
  const guard = new BudgetGuard({
    redis,
    clock: systemClock,
    initPlanDay: (plan, day) => reconciler.reconcile(plan, day),
    onError: (e) => errors.push(e),
  });
  for (const b of workloadBudgets()) guard.setBudgets(b);
  // Warm-up: plan-day initialisation and the first leases happen here, not in the timing.
  for (const b of bids) guard.decide(b);
  await guard.idle();
  const callsBefore = await commandCalls(redis);
  const leaseCallsBefore = guard.stats.leaseCalls;
  let decisions = 0;
  let bidCount = 0;
  const start = performance.now();
  const deadline = start + seconds * 1000;
  while (performance.now() < deadline) {
    for (let i = 0; i < 1000; i++) {
      if (guard.decide(bids[(decisions + i) & 8191] as GuardBid) === 'bid') bidCount++;
    }
    decisions += 1000;
    // Let lease replies in (an ad server's event loop does this between requests).
    await new Promise((r) => setImmediate(r));
  }
  const guardSeconds = (performance.now() - start) / 1000;
  await guard.idle();
  const callsAfter = await commandCalls(redis);
  const leaseCalls = guard.stats.leaseCalls - leaseCallsBefore;
  await guard.close();
  return {
    decisions,
    bidCount,
    guardSeconds,
    // −1: the INFO call itself.
    redisCommands: callsAfter.topLevel - callsBefore.topLevel - 1,
    redisServerCalls: callsAfter.all - callsBefore.all - 1,
    leaseCalls,
    errors,
  };
}

/** `eventCount` bid / win / loss events through SpendTracker, 200 at a time; events per second. */
async function trackSpendPhase(
  redis: RedisClient,
  dynamodb: ReturnType<typeof dynamoDbClient>,
  bids: readonly GuardBid[],
  eventCount: number,
): Promise<{ trackSpendEventsPerSec: number; trackedEvents: number }> {
  const ledger = new SpendLedger({
    client: dynamodb,
    tableName: physicalName(regionResources.tables.spendLedger.suffix),
    region: 'us-east-1',
  });
  const budgets = new Map(workloadBudgets().map((b) => [b.campaign.campaignId, b]));
  // As track-spend runs it: every win writes its outbox intent first and closes it after the apply.
  const outbox = new SpendOutbox({
    client: dynamodb,
    tableName: physicalName(regionResources.tables.spendLedger.suffix),
    region: 'us-east-1',
  });
  const tracker = new SpendTracker({
    redis,
    ledger,
    outbox,
    reconciler: new Reconciler({
      redis,
      ledger,
      clock: systemClock,
      campaignsOfAccount: async () => [...budgets.keys()],
    }),
    clock: systemClock,
    budgets: async (id) => budgets.get(id),
  });
  const now = Date.now();
  const events: Buffer[] = [];
  for (let i = 0; events.length < eventCount; i++) {
    const b = bids[i & 8191] as GuardBid;
    const base = {
      v: 1 as const,
      bidId: `tb${i}`,
      campaignId: b.campaignId,
      armId: b.armId as string,
      bidAt: now - 1000,
      bidPriceMicros: b.priceMicros,
    };
    const e: SpendEvent =
      i % 5 < 2
        ? { type: 'bid', ...base }
        : i % 5 < 4
          ? { type: 'win', ...base, at: now, clearingPriceMicros: Math.floor(b.priceMicros * 0.7) }
          : { type: 'loss', ...base, at: now };
    events.push(encodeSpendEvent(e));
  }
  // Warm the plan-days (first win per plan-day initialises it from the ledger).
  await Promise.all(events.slice(0, 200).map((e) => tracker.handle(e)));
  const tStart = performance.now();
  for (let i = 200; i < events.length; i += 200) {
    await Promise.all(events.slice(i, i + 200).map((e) => tracker.handle(e)));
  }
  const trackSeconds = (performance.now() - tStart) / 1000;
  return {
    trackSpendEventsPerSec: Math.round((events.length - 200) / trackSeconds),
    trackedEvents: events.length - 200,
  };
}

/** Runs the benchmark: the ceiling, the script transports, the guard, track-spend. */
export async function run(args: string[]): Promise<Record<string, unknown>> {
  const seconds = arg(args, 'seconds', 3);
  const eventCount = Math.floor(arg(args, 'events', 4000));
  const redisServer = await startRedis();
  const dynalite = await startDynalite();
  const port = Number(redisServer.nodes[0]?.split(':')[1]);
  const redis = connectRedis({ mode: 'standalone', nodes: [{ host: '127.0.0.1', port }], tls: false });
  const dynamodb = dynamoDbClient({ region: 'us-east-1', dynamodb: dynalite.url });
  try {
    await provisionTables(dynamodb);
    const ceiling = await measureCeiling(redis as Redis, port);
    // Each transport twice, alternating (the first round warms the JIT for both).
    await scriptCallCost(redis, 'client', 50_000);
    await scriptCallCost(redis, 'raw', 50_000);
    const scriptCalls = {
      client: await scriptCallCost(redis, 'client', 200_000),
      raw: await scriptCallCost(redis, 'raw', 200_000),
    };
    const bids = workloadBids();
    const g = await guardPhase(redis, bids, seconds);
    const { trackSpendEventsPerSec, trackedEvents } = await trackSpendPhase(
      redis,
      dynamodb,
      bids,
      eventCount,
    );

    const decisionsPerSec = Math.round(g.decisions / g.guardSeconds);
    const redisOpsPer1000Bids = +((g.redisCommands * 1000) / Math.max(1, g.bidCount)).toFixed(3);
    return {
      decisionsPerSec,
      bidsPerSec: Math.round(g.bidCount / g.guardSeconds),
      redisOpsPer1000Bids,
      leaseCallsPer1000Bids: +((g.leaseCalls * 1000) / Math.max(1, g.bidCount)).toFixed(3),
      redisServerCallsInclScriptInternalsPer1000Bids: +(
        (g.redisServerCalls * 1000) /
        Math.max(1, g.bidCount)
      ).toFixed(3),
      noBudgetShare: +(1 - g.bidCount / g.decisions).toFixed(4),
      trackSpendEventsPerSec,
      scriptCalls,
      ...ceiling,
      decisionsToCeilingRatio: +(decisionsPerSec / ceiling.redisCeilingOpsPerSec).toFixed(3),
      trackSpendToCeilingRatio: +(trackSpendEventsPerSec / ceiling.redisCeilingOpsPerSec).toFixed(4),
      targets: { decisionsPerSec: 500_000, redisOpsPer1000Bids: 10 },
      meetsTargets: decisionsPerSec >= 500_000 && redisOpsPer1000Bids <= 10,
      guardErrors: g.errors.length,
      workload: {
        seconds,
        campaigns: CAMPAIGNS,
        plansPerBid: 3,
        budgets: BUDGETS,
        priceRangeMicros: PRICE_RANGE,
        floatFraction: 0.0002,
        trackSpendEvents: trackedEvents,
        trackSpendMix: '40% bid, 40% win, 20% loss; ledger on dynalite',
      },
    };
  } finally {
    redis.disconnect();
    dynamodb.destroy();
    await Promise.all([redisServer.stop(), dynalite.stop()]);
  }
}
