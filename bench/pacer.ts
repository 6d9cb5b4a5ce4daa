/**
 * `npm run bench -- pacer [--campaigns 100000] [--ticks 5] [--controller default|linear]`:
 * the pacing service against a real redis-server, beside the raw-Redis ceiling measured in the
 * same run.
 *
 * - tickMsFor100kCampaigns: one shard instance's tick over `--campaigns` campaigns — budgets from
 *   the warm cache (ShardBudgets), live spend of every plan-day read from Redis (one pipelined
 *   read), one controller step per plan, fenced publish of every campaign hash (and changed
 *   state) — the real ShardPacer with its lease and SSM reads stubbed (they are one call each);
 *   median of `--ticks` steady ticks after a first tick (empty Redis: every hash and the budgets
 *   snapshot written whole), which is reported apart; beside it, per steady tick: Redis busy time
 *   and commands (INFO commandstats, scripts' inner calls included), client CPU, campaign hashes
 *   written — work counts that do not depend on how loaded the machine is;
 * - takeoverTickMs: the first tick of a new leader (DESIGN.md: ≤ 5 s at 100,000 campaigns, within
 *   its own 10 s window): another pacer of the shard, which followed every tick as a non-leader
 *   (its own budgets cache, spend reads and controller state, as a warm instance does), takes the
 *   lease: it reloads the state its predecessor stored and rewrites every campaign hash whole;
 *   with its phases, Redis busy time and client CPU; then its next tick (a continuing publish,
 *   `afterTakeoverTickMs`), and a cold process taking over from it (`coldTakeoverTickMs`: budgets
 *   from the Redis snapshot, no state of its own);
 * - readerLookupsPerSec: PacingReader.forBid() from the local cache, per second, one process, for
 *   the request mix's Zipf-distributed candidates (and, reported beside it, a uniform stream);
 * - remoteReadReduction: 1 − remote reads / lookups at a stated request mix (below), against one
 *   remote read per lookup;
 * - pacerPeakRssMb: the process's peak resident memory after the ticks, before the reader phase
 *   (what sizes the pacer function's memory; docs/operations.md, "Pacer memory");
 * - redisCeilingOpsPerSec: pipelined INCRBY ceiling (bench/ceiling.ts).
 *
 * Progress goes to stderr; the last line on stdout is the JSON. The controller is pluggable
 * (`--controller`): `default` is whatever shared/pacing/controller/index.ts exports, `linear` the
 * baseline, `changing` the baseline with a throttle that moves every tick (a feedback
 * controller's write volume: every plan's parameters change every tick). `--spend
 * ioredis` reads live spend through ioredis instead of the raw reader; `--tick-only` stops after the
 * ticks (profiling).
 */
import type { Redis } from 'ioredis';
import { startRedis } from '../local/emulators/redis.js';
import { connectRedis } from '../shared/redis/connect.js';
import { measureCeiling } from './ceiling.js';
import { measurePacerMemory } from './pacer-memory.js';
import { cachedLookups, remoteReads } from './pacer-reader.js';
import { median, progress, setUpShard, steadyTicks, takeoverTicks } from './pacer-ticks.js';
import { ARM_EVERY, benchController, CAMPAIGNS_PER_ACCOUNT } from './pacer-workload.js';

function arg(args: string[], name: string, fallback: number): number {
  const i = args.indexOf(`--${name}`);
  const v = i >= 0 ? Number(args[i + 1]) : fallback;
  if (!Number.isFinite(v) || v <= 0) throw new RangeError(`--${name} must be a positive number`);
  return v;
}

function argString(args: string[], name: string, fallback: string): string {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? String(args[i + 1]) : fallback;
}

/** Runs the benchmark: the ceiling, the ticks, the takeovers, the pacer's memory, the reader. */
export async function run(args: string[]): Promise<Record<string, unknown>> {
  const campaigns = Math.floor(arg(args, 'campaigns', 100_000));
  const ticks = Math.floor(arg(args, 'ticks', 5));
  const controllerName = argString(args, 'controller', 'default');
  const controller = benchController(controllerName);
  const server = await startRedis();
  const port = Number(server.nodes[0]?.split(':')[1]);
  const redis = connectRedis(
    { mode: 'standalone', nodes: [{ host: '127.0.0.1', port }], tls: false },
    { autoPipelining: false },
  );
  const readerRedis = connectRedis({ mode: 'standalone', nodes: [{ host: '127.0.0.1', port }], tls: false });
  try {
    const ceiling = await measureCeiling(redis as Redis, port);
    progress(`redis ceiling ${ceiling.redisCeilingOpsPerSec} ops/s`);
    const shard = await setUpShard({
      redis,
      campaigns,
      controller,
      spendReader: argString(args, 'spend', 'raw'),
    });
    const { first, steady, serverMs, clientCpuMs, commands, tickMs } = await steadyTicks(shard, ticks);
    const takeovers = await takeoverTicks(shard);
    // The pacer's memory: one pacer alone in a process of its own (this one holds three pacers and
    // the benchmark's workload): a cold process taking over the seeded shard, then steady ticks.
    const memory = await measurePacerMemory({
      port,
      campaigns,
      tick: shard.tick,
      epoch: 4,
      controller: controllerName,
    });
    shard.tick = memory.nextTick;
    const pacerPeakRssMb = memory.peakRssMb;
    progress(
      `pacer peak RSS ${pacerPeakRssMb} MB (${campaigns} campaigns, one pacer: ${JSON.stringify(memory.ticksMs)} ms)`,
    );
    const perTick = {
      pacerPeakRssMb,
      redisBusyMsPerTick: median(serverMs),
      clientCpuMsPerTick: median(clientCpuMs),
      redisCommandsPerTick: median(commands),
      campaignHashesWrittenPerTick: median(steady.map((o) => o.publish?.campaignsWritten ?? 0)),
    };
    const ceilingRatio = +(campaigns / (tickMs / 1000) / ceiling.redisCeilingOpsPerSec).toFixed(3);
    if (args.includes('--tick-only'))
      return {
        controller: controller.name,
        tickMsFor100kCampaigns: tickMs,
        tickPhasesMs: steady.map((o) => o.phasesMs),
        ...takeovers,
        campaignsPerTick: campaigns,
        ...perTick,
        ...ceiling,
        campaignsPerSecToCeilingRatio: ceilingRatio,
      };
    const phase = (k: 'inputs' | 'claimAndSpend' | 'step' | 'publish') =>
      median(steady.map((o) => o.phasesMs?.[k] ?? 0));
    const lookupCampaigns = Math.min(campaigns, 20_000);
    const lookups = await cachedLookups(readerRedis, lookupCampaigns, shard.accountOf);
    const { mix, remoteReadReduction, readerHitRate } = await remoteReads(
      readerRedis,
      lookupCampaigns,
      shard.accountOf,
    );
    const { targets, verdict } = verdicts({
      campaigns,
      tickMs,
      takeoverTickMs: takeovers.takeoverTickMs,
      remoteReadReduction,
      readerLookupsPerSec: lookups.readerLookupsPerSec,
    });
    return {
      controller: controller.name,
      campaignsPerTick: steady[0]?.campaignsPaced ?? 0,
      plansPerTick: steady[0]?.plansPaced ?? 0,
      tickMsFor100kCampaigns: tickMs,
      tickMsMax: Math.max(...steady.map((o) => o.durationMs)),
      tickPhasesMs: {
        inputs: phase('inputs'),
        claimAndSpendRead: phase('claimAndSpend'),
        controller: phase('step'),
        publish: phase('publish'),
      },
      firstTickMs: first.durationMs,
      ...takeovers,
      ...perTick,
      ...lookups,
      readerLookupStream:
        'forBid over 20,000 cached campaigns (1 in 5 with arms); readerLookupsPerSec: candidates drawn Zipf(s = 1.0) as in requestMix; uniform: every campaign equally likely',
      remoteReadReduction,
      readerHitRate,
      requestMix: mix,
      ...ceiling,
      campaignsPerSecToCeilingRatio: ceilingRatio,
      targets,
      verdict,
      meetsTargets: Object.values(verdict).every((v) => v === 'pass'),
      workload: {
        accounts: Math.ceil(campaigns / CAMPAIGNS_PER_ACCOUNT),
        armsOnOneCampaignIn: ARM_EVERY,
        liveSpendFieldsPerPlanDay: 18,
        redis: 'one standalone redis-server on loopback, same 2-core machine',
      },
    };
  } finally {
    redis.disconnect();
    readerRedis.disconnect();
    await server.stop();
  }
}

/** The pacer's targets (DESIGN.md) and a pass / fail per target (the tick targets need 100,000 campaigns). */
function verdicts(m: {
  readonly campaigns: number;
  readonly tickMs: number;
  readonly takeoverTickMs: number;
  readonly remoteReadReduction: number;
  readonly readerLookupsPerSec: number;
}) {
  const targets = {
    tickMsFor100kCampaigns: 2_000,
    takeoverTickMs: 5_000,
    remoteReadReduction: 0.9,
    readerLookupsPerSec: 1_000_000,
  };
  const verdict = {
    tickMsFor100kCampaigns:
      m.campaigns >= 100_000 && m.tickMs <= targets.tickMsFor100kCampaigns ? 'pass' : 'fail',
    takeoverTickMs: m.campaigns >= 100_000 && m.takeoverTickMs <= targets.takeoverTickMs ? 'pass' : 'fail',
    remoteReadReduction: m.remoteReadReduction >= targets.remoteReadReduction ? 'pass' : 'fail',
    readerLookupsPerSec: m.readerLookupsPerSec >= targets.readerLookupsPerSec ? 'pass' : 'fail',
  };
  for (const [k, v] of Object.entries(verdict)) progress(`${k}: ${v}`);
  return { targets, verdict };
}
