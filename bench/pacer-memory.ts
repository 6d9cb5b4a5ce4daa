/**
 * The pacer's memory: one pacer instance alone in a process of its own, as a Lambda execution
 * environment holds it. The benchmark's own process cannot tell: it holds three pacers (leader,
 * follower, a cold process), the workload generator's items and the reader phase.
 *
 * The child (this file run as a script) connects to the benchmark's seeded redis-server, builds one
 * `ShardBudgets` (the shard's budget items from the workload generator, as the index query would
 * return them) and one `ShardPacer`, takes the lease over as a cold process (state reload, the
 * heaviest tick: budgets snapshot, every stored state decoded), runs steady ticks, and prints its
 * peak resident set (`process.resourceUsage().maxRSS`). The item array stays referenced for the
 * incremental queries, so the figure is an upper bound of a Lambda pacer, which reads the items
 * from DynamoDB page by page (docs/operations.md, "Pacer memory").
 */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { ShardBudgets } from '../shared/pacing/budgets-cache.js';
import { ShardPacer } from '../shared/pacing/pacer.js';
import { rawSpendSource } from '../shared/pacing/spend-source.js';
import { connectRedis } from '../shared/redis/connect.js';
import { PACER_NODE_OPTIONS } from '../shared/region/pacer-settings.js';
import { systemClock } from '../shared/time/clock.js';
import { fixedIdentity } from '../sim/engine-parts.js';
import {
  benchController,
  budgetItems,
  CAMPAIGNS_PER_ACCOUNT,
  SHARD,
  shardAccounts,
} from './pacer-workload.js';

/** What {@link measurePacerMemory} reports. */
export interface PacerMemory {
  /** The child's peak resident set, MiB. */
  readonly peakRssMb: number;
  /** Its takeover tick, then each steady tick, ms. */
  readonly ticksMs: readonly number[];
  /** The tick number after the child's last. */
  readonly nextTick: number;
}

/** Options of {@link measurePacerMemory}. */
export interface PacerMemoryOptions {
  /** The seeded redis-server's port (loopback). */
  readonly port: number;
  /** Campaigns of the shard (the workload generator's). */
  readonly campaigns: number;
  /** First tick number the child may run (after the benchmark's own). */
  readonly tick: number;
  /** Lease epoch of the child's takeover (above every epoch the benchmark used). */
  readonly epoch: number;
  /** `--controller` of the benchmark. */
  readonly controller: string;
  /** Steady ticks after the takeover. @default 3 */
  readonly steadyTicks?: number;
}

/** Runs one pacer in a child process and returns its peak memory. */
export function measurePacerMemory(o: PacerMemoryOptions): Promise<PacerMemory> {
  const args = [
    // The pacer function's flags: the young generation they allow is part of its peak.
    ...PACER_NODE_OPTIONS,
    '--import',
    'tsx',
    fileURLToPath(import.meta.url),
    `--port=${o.port}`,
    `--campaigns=${o.campaigns}`,
    `--tick=${o.tick}`,
    `--epoch=${o.epoch}`,
    `--controller=${o.controller}`,
    `--steady=${o.steadyTicks ?? 3}`,
  ];
  return new Promise((resolve, reject) => {
    execFile(process.execPath, args, { maxBuffer: 1 << 20 }, (error, stdout, stderr) => {
      if (error) {
        reject(new Error(`the single-pacer memory run failed: ${stderr.trim() || error.message}`));
        return;
      }
      resolve(JSON.parse(stdout.trim().split('\n').at(-1) as string) as PacerMemory);
    });
  });
}

/** The child: one pacer, a cold takeover and steady ticks; prints {@link PacerMemory}. */
async function child(): Promise<void> {
  const { values } = parseArgs({
    options: {
      port: { type: 'string' },
      campaigns: { type: 'string' },
      tick: { type: 'string' },
      epoch: { type: 'string' },
      controller: { type: 'string' },
      steady: { type: 'string' },
    },
  });
  const port = Number(values.port);
  const campaigns = Number(values.campaigns);
  const epoch = Number(values.epoch);
  const redis = connectRedis(
    { mode: 'standalone', nodes: [{ host: '127.0.0.1', port }], tls: false },
    { autoPipelining: false },
  );
  const items = budgetItems(
    shardAccounts(Math.ceil(campaigns / CAMPAIGNS_PER_ACCOUNT)),
    campaigns,
    Date.now(),
  );
  items.sort((a, b) => a.updatedAt - b.updatedAt);
  const source = async (since: number) => ({ items: items.filter((i) => i.updatedAt >= since) });
  const pacer = new ShardPacer({
    shard: SHARD,
    region: 'bench',
    redis,
    controller: benchController(values.controller ?? 'default'),
    budgets: new ShardBudgets({ source, clock: systemClock }),
    spend: rawSpendSource(redis, { timeoutMs: 5_000 }),
    clock: systemClock,
    tickMs: 10_000,
    logMaxLen: 1_000,
    redisSilenceMs: 5_000,
  });
  const who = fixedIdentity({
    instanceId: 's0-i2',
    publisherId: 's0-i2/memory',
    publisherRegion: 'bench',
    epoch,
    readAtMs: Date.now(),
  });
  let tick = Math.max(Number(values.tick), Math.floor(Date.now() / 10_000));
  const ticksMs: number[] = [];
  for (let i = 0; i <= Number(values.steady); i++) {
    const o = await pacer.runTick(tick++, who);
    if (!o.published) throw new Error(`tick ${o.tick} did not publish: ${JSON.stringify(o.claim)}`);
    ticksMs.push(o.durationMs);
  }
  redis.disconnect();
  const out: PacerMemory = {
    peakRssMb: Math.round(process.resourceUsage().maxRSS / 1024),
    ticksMs,
    nextTick: tick,
  };
  console.log(JSON.stringify(out));
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await child();
