/**
 * The switch end to end under `npm start`'s runtime: two local regions, the pacer function in its
 * own processes per instance (the real handler: peers from PACELINE_REGIONS, peer caches found
 * through each region's local ElastiCache API), and the operator CLI. `failover --wait` sees
 * every shard of A's cache claimed by B's pacer at the new generation; `failback --wait` sees A's
 * own pacer back. Wall-clock: a "minute" of 12 s and 2 s ticks; the waits are bounded generously.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../../cli/paceline.js';
import { type RegionRuntime, startRuntime } from '../../../local/runtime.js';
import { readAuditLog } from '../../../shared/pacing/publisher.js';
import { parsePublisherId } from '../../../shared/pacing/status.js';
import { connectRedis, type RedisClient, redisConfigFromEnv } from '../../../shared/redis/connect.js';
import { tempDir } from '../../support/tmp.js';

let runtimes: RegionRuntime[];
let redisA: RedisClient;

beforeAll(async () => {
  runtimes = await startRuntime({
    regions: ['us-east-1', 'us-west-2'],
    redisMode: 'standalone',
    stateDir: tempDir('paceline-regions-runtime-'),
    functions: ['pacer'],
    pacer: { shards: 1, instancesPerShard: 1, tickMs: 2_000, leaseTtlMs: 5_000 },
    msPerMinute: 12_000,
    functionOutput: process.env.DEBUG_RUNTIME ? 'inherit' : 'ignore',
    replicationLagMs: 200,
  });
  redisA = connectRedis(redisConfigFromEnv((runtimes[0] as RegionRuntime).region.clientEnv));
}, 180_000);

afterAll(async () => {
  redisA?.disconnect();
  await Promise.all((runtimes ?? []).map((r) => r.stop()));
});

async function cli(argv: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const env = (runtimes[0] as RegionRuntime).region.clientEnv;
  const code = await main(argv, {
    out: (l) => out.push(l),
    err: (l) => err.push(l),
    env,
    now: () => Date.now(),
  });
  return { code, out, err };
}

describe('npm start: the cross-region switch end to end', () => {
  it('fails us-east-1 over to us-west-2’s pacer and back', async () => {
    const over = await cli([
      'failover',
      '--region',
      'us-east-1',
      '--to',
      'us-west-2',
      '--json',
      '--wait',
      '90',
    ]);
    expect(over.code, over.err.join('\n')).toBe(0);
    expect(JSON.parse(over.out[0] as string)).toMatchObject({ changed: true, confirmedShards: 1, shards: 1 });
    // The pacer's publisher ids are `<instance>/<pid>-…`: the claim at the new generation came from
    // a process of us-west-2's pacer.
    const westPids = new Set((runtimes[1] as RegionRuntime).invokers.get('pacer')?.pids ?? []);
    const claims = (await readAuditLog(redisA, 0)).filter((e) => e.kind === 'claim' && e.accepted);
    const pid = Number(parsePublisherId(claims.at(-1)?.publisher ?? '').process.split('-')[0]);
    expect(westPids.has(pid)).toBe(true);
    const back = await cli([
      'failback',
      '--region',
      'us-east-1',
      '--json',
      '--wait',
      process.env.DEBUG_RUNTIME ? '20' : '90',
    ]);
    expect(back.code, back.err.join('\n')).toBe(0);
    expect(JSON.parse(back.out[0] as string)).toMatchObject({ changed: true, confirmedShards: 1, shards: 1 });
    const eastPids = new Set((runtimes[0] as RegionRuntime).invokers.get('pacer')?.pids ?? []);
    const after = (await readAuditLog(redisA, 0)).filter((e) => e.kind === 'claim' && e.accepted);
    const last = parsePublisherId(after.at(-1)?.publisher ?? '');
    expect(last.region).toBe('us-east-1');
    expect(eastPids.has(Number(last.process.split('-')[0]))).toBe(true);
  }, 240_000);
});
