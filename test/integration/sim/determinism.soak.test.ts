/**
 * The simulator is deterministic for a seed: the same scenario and seed give the same outcome,
 * bit for bit (every plan-day's spend, impressions, deviations, the request stream), through a
 * leader kill, a Redis restart and a region flip; another seed gives another market. Runs four
 * simulated hours of a small scenario, four times (soak tier: each run keeps a core busy); one of
 * the runs writes Redis commands only after each loop of the simulated second (`overlap: false`),
 * one reaches Redis through a proxy that delays every chunk by up to 2 ms (another host's timing:
 * replies land at other points of the simulator's awaits).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { benchScenario } from '../../../bench/sim.js';
import type { RunningRedis } from '../../../local/emulators/redis.js';
import { connectRedis, type RedisClient } from '../../../shared/redis/connect.js';
import { RawScriptCaller } from '../../../shared/redis/resp/script-caller.js';
import { ManualClock } from '../../../shared/time/clock.js';
import { runStrategy, type StrategyRun } from '../../../sim/runner.js';
import { parseScenario } from '../../../sim/scenario.js';
import { type LatencyProxy, startLatencyProxy } from '../../support/latency-proxy.js';
import { redisForFile } from '../pacing/simulation.js';

const scenario = parseScenario({
  name: 'determinism',
  timeZone: 'America/New_York',
  start: '2026-03-04',
  historyDays: 0,
  traffic: { requestsPerDay: 60_000, shape: 'flat' },
  segments: { a: 0.6, b: 0.4 },
  notices: { duplicateRate: 0.05, lossNoticeRate: 0.5, winNoticeLoss: 0.01 },
  accounts: [
    {
      id: 'acc',
      dailyBudget: 2,
      campaigns: [
        { id: 'c1', dailyBudget: 1.5, targeting: { segments: ['a'], reach: 0.3 } },
        // Created mid-run: the pacer's budgets cache picks it up incrementally.
        { id: 'late', dailyBudget: 1, createdAt: '2026-03-04T00:30:00-05:00', targeting: { reach: 0.1 } },
        {
          id: 'c2',
          dailyBudget: 1,
          targeting: { segments: ['b'], reach: 0.5 },
          arms: [
            { id: 'A', share: 0.4, dailyBudget: 0.5 },
            { id: 'B', share: 0.6, dailyBudget: 0.6 },
          ],
        },
      ],
    },
  ],
  faults: [
    { kind: 'leader-killed', at: '2026-03-04T01:00:00-05:00' },
    { kind: 'redis-restarted', at: '2026-03-04T02:00:00-05:00' },
    { kind: 'notices-stalled', from: '2026-03-04T02:30:00-05:00', to: '2026-03-04T02:32:00-05:00' },
    { kind: 'region-flipped', at: '2026-03-04T03:00:00-05:00' },
  ],
});
const UNTIL = scenario.startMs + 4 * 3_600_000;

let server: RunningRedis | undefined;
let redis: RedisClient | undefined;
let proxy: LatencyProxy | undefined;
/** The same server through the proxy. */
let slow: RedisClient | undefined;

beforeAll(async () => {
  ({ server, redis } = await redisForFile());
  proxy = await startLatencyProxy(Number(server.nodes[0]?.split(':')[1]), 2);
  slow = connectRedis({ mode: 'standalone', nodes: [{ host: '127.0.0.1', port: proxy.port }], tls: false });
});
afterAll(async () => {
  redis?.disconnect();
  slow?.disconnect();
  await proxy?.stop();
  await server?.stop();
});

async function run(seed: number, overlap = true, client = redis): Promise<StrategyRun> {
  const r = client as RedisClient;
  await r.flushall();
  return runStrategy({
    redis: r,
    clock: new ManualClock(scenario.startMs),
    scenario,
    strategy: 'paceline',
    seed,
    untilMs: UNTIL,
    overlap,
  });
}

/** Everything but the measured run time. */
const outcome = (r: StrategyRun) => {
  const { wallMs: _w, cpuMs: _c, redisCpuMs: _r, ...rest } = r;
  return rest;
};

describe('simulator determinism', () => {
  it('the same seed gives the same outcome through faults; another seed another one', async () => {
    const a = await run(7);
    // Another host's timing: every reply later, by a different amount, in other chunks.
    const b = await run(7, true, slow);
    expect(a.requests).toBeGreaterThan(5_000);
    expect(a.bids).toBeGreaterThan(500);
    expect(a.faults).toHaveLength(4);
    expect(a.errors).toEqual([]);
    expect(a.stateReloads).toBeGreaterThanOrEqual(2);
    expect(a.staleWritesAccepted).toBe(0);
    expect(a.plans.find((p) => p.plan === 'c:late/campaign')?.impressions).toBeGreaterThan(0);
    expect(outcome(b)).toEqual(outcome(a));
    // Lease calls and notices written while the second's loops run, or after them: the same
    // commands in the same order, so the same outcome.
    const serial = await run(7, false);
    expect(outcome(serial)).toEqual(outcome(a));
    const c = await run(8);
    expect(c.requests).not.toBe(a.requests);
  }, 1_800_000);

  it('a busy first minute gives the same outcome whatever the timing of the replies', async () => {
    // The benchmark's market at a daytime rate (30 M requests a day, 1,000 campaigns), its first
    // 72 s: every plan-day starts, the first notices apply while leases are in flight. Through
    // proxies adding up to 0.25 … 4 ms per chunk, replies land at other points of the simulator's
    // awaits. A raw script caller that sends a script's first call as EVALSHA fails this: its
    // NOSCRIPT retry goes after the lease calls written meanwhile, or before them when the reply
    // is read during the refresh wait, and the runs disagree.
    const busy = benchScenario(1000, 30_000_000);
    const runBusy = async (client: RedisClient) => {
      await client.flushall();
      await client.script('FLUSH');
      // As a restart would: the raw script caller's connections (reused by the direct runs) go too.
      RawScriptCaller.of(client).reconnect();
      return runStrategy({
        redis: client,
        clock: new ManualClock(busy.startMs),
        scenario: busy,
        strategy: 'paceline',
        untilMs: busy.startMs + 72_000,
      });
    };
    const direct = await runBusy(redis as RedisClient);
    expect(direct.errors).toEqual([]);
    expect(direct.requests).toBeGreaterThan(10_000);
    expect(direct.notices).toBeGreaterThan(1_000);
    for (const maxDelayMs of [0.25, 0.5, 1, 2, 4]) {
      const p = await startLatencyProxy(Number(server?.nodes[0]?.split(':')[1]), maxDelayMs, 3);
      const c = connectRedis({
        mode: 'standalone',
        nodes: [{ host: '127.0.0.1', port: p.port }],
        tls: false,
      });
      try {
        expect(outcome(await runBusy(c)), `through a ${maxDelayMs} ms proxy`).toEqual(outcome(direct));
      } finally {
        c.disconnect();
        await p.stop();
      }
    }
  }, 600_000);
});
