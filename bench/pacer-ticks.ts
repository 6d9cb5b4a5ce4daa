/**
 * The tick phases of the pacer benchmark (bench/pacer.ts says what each figure means): the shard
 * set up against the seeded redis-server, the leader's steady ticks with a follower beside it, and
 * the takeovers (warm follower, its next tick, a cold process).
 */
import type { Redis } from 'ioredis';
import type { BudgetItem } from '../shared/budget/repository.js';
import { dayWindow } from '../shared/budget/time-zone.js';
import { ShardBudgets } from '../shared/pacing/budgets-cache.js';
import type { PacingController } from '../shared/pacing/controller/index.js';
import { ShardPacer, type TickIdentity, type TickOutcome } from '../shared/pacing/pacer.js';
import { pipelinedSpendSource, rawSpendSource } from '../shared/pacing/spend-source.js';
import type { RedisClient } from '../shared/redis/connect.js';
import { planDayKeys } from '../shared/spend/keys.js';
import { systemClock } from '../shared/time/clock.js';
import { fixedIdentity } from '../sim/engine-parts.js';
import { budgetItems, CAMPAIGNS_PER_ACCOUNT, SHARD, shardAccounts, ZONES } from './pacer-workload.js';

/** Progress lines of the pacer benchmark (stderr; stdout holds the JSON). */
export const progress = (line: string) => process.stderr.write(`[bench pacer] ${line}\n`);

/** Live spend of every plan-day: initialised hashes with a day of in-flight and lease slots. */
async function seedSpend(redis: Redis, budgets: ShardBudgets, now: number): Promise<string[]> {
  const keys = new Set<string>();
  const days = new Map(ZONES.map((z) => [z, dayWindow(now, z).day]));
  for (const b of budgets.campaigns()) {
    for (const p of [...b.common, ...b.arms.values()])
      keys.add(planDayKeys(p, days.get(p.timeZone) as string).state);
  }
  const slot = Math.floor(now / 60_000);
  let pipeline = redis.pipeline();
  let n = 0;
  for (const key of keys) {
    const fields: (string | number)[] = [
      'r',
      `e${n}`,
      'q',
      60_000,
      't',
      600_000,
      'g',
      0,
      'c',
      1_000_000 + (n % 1000) * 1000,
    ];
    for (let k = 0; k < 5; k++) fields.push(`l:${slot - k}`, 2_000, `f:${slot - k}`, 3_000);
    // The running sums a lease call at `now` leaves (docs/spend.md, "Running sums"): sk = its first
    // live slot, sl / sf the slot fields' sums. The pacer reads them (one HMGET) for 2 slots.
    fields.push('sk', slot - 10, 'sl', 5 * 2_000, 'sf', 5 * 3_000);
    pipeline.hset(key, ...fields);
    if (++n % 5_000 === 0) {
      await pipeline.exec();
      pipeline = redis.pipeline();
    }
  }
  await pipeline.exec();
  return [...keys];
}

/**
 * What the guards' lease calls do to the running sums as minutes pass (docs/spend.md): the sums'
 * first slot `sk` follows the first live slot; the seeded sums hold the live slots, so the
 * snapshots the spend read folds stay the same.
 */
async function moveSums(redis: Redis, keys: readonly string[], now: number): Promise<void> {
  const kmin = Math.floor((now - 600_000) / 60_000);
  for (let from = 0; from < keys.length; from += 5_000) {
    const pipeline = redis.pipeline();
    for (const key of keys.slice(from, from + 5_000)) pipeline.hset(key, 'sk', kmin);
    await pipeline.exec();
  }
}

/** Microseconds Redis spent executing commands, and commands run, so far (INFO commandstats). */
async function serverStats(redis: RedisClient): Promise<{ usec: number; calls: number }> {
  const info = await redis.info('commandstats');
  let usec = 0;
  let calls = 0;
  for (const m of info.matchAll(/calls=(\d+),usec=(\d+)/g)) {
    calls += Number(m[1]);
    usec += Number(m[2]);
  }
  return { usec, calls };
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] as number;
}

/** The shard under test: its pacers, how to build another, and the tick counter they share. */
export interface BenchShard {
  readonly redis: RedisClient;
  /** The leader (instance 0) and the warm follower (instance 1) that takes over later. */
  readonly pacer: ShardPacer;
  readonly follower: ShardPacer;
  /** A new pacer process of the shard with a cold budgets cache. */
  readonly coldProcess: () => ShardPacer;
  /** Instance `i` of the shard; it holds the lease (epoch `epoch`) or follows. */
  readonly identity: (i: number, epoch: number, leads: boolean) => TickIdentity;
  /** Moves the seeded running sums on, untimed, when the minute changed (see setUpShard). */
  readonly keepSumsCurrent: () => Promise<void>;
  /** The account of campaign `c`. */
  readonly accountOf: (c: number) => string;
  /** The next tick number. */
  tick: number;
}

/** Budgets of `campaigns` campaigns, live spend seeded in Redis, a leader and a follower. */
export async function setUpShard(o: {
  readonly redis: RedisClient;
  readonly campaigns: number;
  readonly controller: PacingController<unknown, unknown>;
  /** `ioredis` reads live spend through ioredis, anything else through the raw reader. */
  readonly spendReader: string;
}): Promise<BenchShard> {
  const { redis, campaigns, controller, spendReader } = o;
  const now = Date.now();
  const accountIds = shardAccounts(Math.ceil(campaigns / CAMPAIGNS_PER_ACCOUNT));
  const accountOf = (c: number) => accountIds[Math.floor(c / CAMPAIGNS_PER_ACCOUNT)] as string;
  const items = budgetItems(accountIds, campaigns, now);
  // The index query, in memory: items sorted by updatedAt, a query returns those ≥ since.
  const byUpdate = [...items].sort((a, b) => a.updatedAt - b.updatedAt);
  const budgetSource = async (since: number) => {
    let lo = 0;
    let hi = byUpdate.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((byUpdate[mid] as BudgetItem).updatedAt < since) lo = mid + 1;
      else hi = mid;
    }
    return { items: byUpdate.slice(lo) };
  };
  const budgets = new ShardBudgets({ source: budgetSource, clock: systemClock });
  await budgets.refresh();
  const spendKeys = await seedSpend(redis as Redis, budgets, now);
  const planDays = spendKeys.length;
  // The guards' lease calls keep every plan-day's running sums current (docs/spend.md); on a host
  // slow enough that a minute passes between ticks the seeded sums would age out and the spend
  // read would fall back to whole hashes. Moved on, untimed, when the minute changed.
  let seededMinute = Math.floor(now / 60_000);
  const keepSumsCurrent = async () => {
    const at = Date.now();
    if (Math.floor(at / 60_000) === seededMinute) return;
    await moveSums(redis as Redis, spendKeys, at);
    seededMinute = Math.floor(at / 60_000);
  };
  progress(
    `${campaigns} campaigns, ${budgets.campaigns().length} in the cache, ${planDays} plan-days of live spend seeded`,
  );
  /** A pacer process of the shard (its own budgets cache, spend reader and controller state). */
  const pacerProcess = (shardBudgets: ShardBudgets) =>
    new ShardPacer({
      shard: SHARD,
      region: 'bench',
      redis,
      controller,
      budgets: shardBudgets,
      spend:
        spendReader === 'ioredis' ? pipelinedSpendSource(redis) : rawSpendSource(redis, { timeoutMs: 5_000 }),
      clock: systemClock,
      tickMs: 10_000,
      logMaxLen: 1_000,
      redisSilenceMs: 5_000,
    });
  const pacer = pacerProcess(budgets);
  // The instance that takes over later: it follows every tick as a non-leader (warm).
  const followerBudgets = new ShardBudgets({ source: budgetSource, clock: systemClock });
  await followerBudgets.refresh();
  const follower = pacerProcess(followerBudgets);
  const identity = (i: number, epoch: number, leads: boolean): TickIdentity =>
    fixedIdentity({
      instanceId: `s0-i${i}`,
      publisherId: `s0-i${i}/bench`,
      publisherRegion: 'bench',
      epoch: leads ? epoch : undefined,
      readAtMs: now,
    });
  return {
    redis,
    pacer,
    follower,
    // A cold process (no memory of the shard): budgets from the Redis snapshot, every state loaded.
    coldProcess: () => pacerProcess(new ShardBudgets({ source: budgetSource, clock: systemClock })),
    identity,
    keepSumsCurrent,
    accountOf,
    tick: Math.floor(Date.now() / 10_000),
  };
}

/** The first tick, then `ticks` steady ticks of the leader with their Redis and CPU figures. */
export async function steadyTicks(shard: BenchShard, ticks: number) {
  const { pacer, follower, redis } = shard;
  const who = shard.identity(0, 1, true);
  const follows = shard.identity(1, 0, false);
  const first = await pacer.runTick(shard.tick, who);
  await follower.runTick(shard.tick++, follows);
  progress(
    `first tick (leader change: state reload, whole hashes, full budgets snapshot) ${first.durationMs} ms`,
  );
  const steady: TickOutcome[] = [];
  const serverMs: number[] = [];
  const clientCpuMs: number[] = [];
  const commands: number[] = [];
  for (let i = 0; i < ticks; i++) {
    await shard.keepSumsCurrent();
    const before = await serverStats(redis);
    const cpu = process.cpuUsage();
    const o = await pacer.runTick(shard.tick, who);
    const c = process.cpuUsage(cpu);
    const after = await serverStats(redis);
    // The follower computes the same tick, untimed (outside the leader's Redis figures).
    await follower.runTick(shard.tick++, follows);
    const used = after.usec - before.usec;
    if (!o.published) throw new Error(`tick ${o.tick} did not publish: ${JSON.stringify(o.claim)}`);
    steady.push(o);
    serverMs.push(Math.round(used / 1000));
    clientCpuMs.push(Math.round((c.user + c.system) / 1000));
    commands.push(after.calls - before.calls - 1); // less the INFO of `before`
    progress(
      `tick ${i + 1}/${ticks}: ${o.durationMs} ms ${JSON.stringify(o.phasesMs)}, redis busy ${Math.round(used / 1000)} ms, client CPU ${clientCpuMs.at(-1)} ms, ${commands.at(-1)} Redis commands (scripts' inner calls included), ${o.publish?.campaignsWritten ?? 0} campaign hashes written`,
    );
  }
  return { first, steady, serverMs, clientCpuMs, commands, tickMs: median(steady.map((o) => o.durationMs)) };
}

/** One measured tick of `p` as `as`: duration, phases, Redis busy time, client CPU, hashes written. */
async function measuredTick(shard: BenchShard, p: ShardPacer, as: TickIdentity, what: string) {
  await shard.keepSumsCurrent();
  const before = await serverStats(shard.redis);
  const cpu = process.cpuUsage();
  const o = await p.runTick(shard.tick++, as);
  const c = process.cpuUsage(cpu);
  const after = await serverStats(shard.redis);
  if (!o.published) throw new Error(`${what}: tick ${o.tick} did not publish: ${JSON.stringify(o.claim)}`);
  const figures = {
    ms: o.durationMs,
    phasesMs: o.phasesMs,
    redisBusyMs: Math.round((after.usec - before.usec) / 1000),
    clientCpuMs: Math.round((c.user + c.system) / 1000),
    campaignHashesWritten: o.publish?.campaignsWritten ?? 0,
  };
  progress(`${what}: ${o.durationMs} ms ${JSON.stringify(figures)}`);
  return figures;
}

/**
 * Takeovers (under Lambda about once a minute per shard: an instance's next invocation runs in
 * another process). The warm follower takes the lease: state reload, every field rewritten; then
 * its next tick, then a cold process takes over from it.
 */
export async function takeoverTicks(shard: BenchShard) {
  const leads = shard.identity(1, 2, true);
  const takeover = await measuredTick(shard, shard.follower, leads, 'takeover by a warm follower');
  const afterTakeover = await measuredTick(shard, shard.follower, leads, 'its next tick');
  const cold = await measuredTick(
    shard,
    shard.coldProcess(),
    shard.identity(2, 3, true),
    'takeover by a cold process',
  );
  return {
    takeoverTickMs: takeover.ms,
    takeoverPhasesMs: takeover.phasesMs,
    takeoverRedisBusyMs: takeover.redisBusyMs,
    takeoverClientCpuMs: takeover.clientCpuMs,
    afterTakeoverTickMs: afterTakeover.ms,
    coldTakeoverTickMs: cold.ms,
    coldTakeoverPhasesMs: cold.phasesMs,
  };
}
