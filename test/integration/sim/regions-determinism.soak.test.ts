/**
 * The multi-region simulator is deterministic for a seed: the same scenario and seed give the same
 * outcome, bit for bit (combined and per-region spend of every plan-day, deviations, the
 * allocation counters, grants and reclaims), through a region lost long enough to be reclaimed,
 * its return, the home cut off and a traffic shift; another seed gives another market. Three
 * regions, three simulated hours, each region on its own redis-server (soak tier: each run keeps a
 * core busy).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningRedis, startRedis } from '../../../local/emulators/redis.js';
import { connectRedis, type RedisClient } from '../../../shared/redis/connect.js';
import { ManualClock } from '../../../shared/time/clock.js';
import { runRegions } from '../../../sim/regions/engine.js';
import type { StrategyRun } from '../../../sim/runner.js';
import { parseScenario } from '../../../sim/scenario.js';

const at = (hhmm: string) => `2026-03-04T${hhmm}:00-05:00`;
const scenario = parseScenario({
  name: 'regions-determinism',
  timeZone: 'America/New_York',
  start: '2026-03-04',
  historyDays: 0,
  traffic: { requestsPerDay: 200_000, shape: 'flat' },
  segments: { a: 0.7, b: 0.3 },
  notices: { duplicateRate: 0.05, lossNoticeRate: 0.5 },
  accounts: [
    {
      id: 'acc',
      dailyBudget: 20,
      campaigns: [
        { id: 'big', dailyBudget: 50, targeting: { segments: ['a'], reach: 0.5 } },
        { id: 'small', dailyBudget: 1, targeting: { segments: ['b'], reach: 0.1 } },
        { id: 'late', dailyBudget: 5, createdAt: at('00:20'), targeting: { reach: 0.2 } },
      ],
    },
  ],
  regions: [
    {
      name: 'us-east-1',
      traffic: 0.5,
      faults: [{ kind: 'home-region-unreachable', from: at('02:00'), to: at('02:20') }],
    },
    {
      name: 'us-west-2',
      traffic: 0.3,
      shifts: [{ at: at('01:30'), traffic: 0.4 }],
      replicationLagSeconds: 5,
      faults: [{ kind: 'region-lost', from: at('00:10'), to: at('00:50') }],
    },
    {
      name: 'eu-west-1',
      traffic: 0.2,
      shifts: [{ at: at('01:30'), traffic: 0.1 }],
      replicationLagSeconds: 3,
    },
  ],
});
const UNTIL = scenario.startMs + 3 * 3_600_000;

const servers: RunningRedis[] = [];
const clients: RedisClient[] = [];
beforeAll(async () => {
  for (let i = 0; i < 3; i++) {
    const s = await startRedis();
    servers.push(s);
    const port = Number(s.nodes[0]?.split(':')[1]);
    clients.push(connectRedis({ mode: 'standalone', nodes: [{ host: '127.0.0.1', port }], tls: false }));
  }
});
afterAll(async () => {
  for (const c of clients) c.disconnect();
  await Promise.all(servers.map((s) => s.stop()));
});

async function run(seed: number): Promise<StrategyRun> {
  for (const c of clients) await c.flushall();
  return runRegions({
    redis: clients,
    clock: new ManualClock(scenario.startMs),
    scenario,
    strategy: 'paceline',
    seed,
    untilMs: UNTIL,
  });
}

/** Everything a run decided (not its timings). */
function outcome(r: StrategyRun) {
  return {
    requests: r.requests,
    bids: r.bids,
    notices: r.notices,
    faults: r.faults,
    errors: r.errors,
    plans: r.plans,
    regions: r.regions,
  };
}

describe('multi-region simulator determinism', () => {
  it('the same seed gives the same outcome through a region lost, reclaimed and back, and the home cut off', async () => {
    const first = await run(3);
    const second = await run(3);
    expect(first.errors).toEqual([]);
    expect(first.faults).toEqual([
      '2026-03-04T05:10:00.000Z region-lost us-west-2',
      '2026-03-04T05:50:00.000Z region-back us-west-2',
      '2026-03-04T07:00:00.000Z home-region-unreachable us-east-1',
      '2026-03-04T07:20:00.000Z home-region-reachable us-east-1',
    ]);
    // The lost region's allocation came back (its ack + 20 min 10 s fell inside the 40 minutes).
    expect(first.regions?.find((r) => r.region === 'us-east-1')?.reclaims).toBeGreaterThan(0);
    expect(first.bids).toBeGreaterThan(1_000);
    expect(outcome(second)).toEqual(outcome(first));
    const other = await run(4);
    expect(other.requests).not.toBe(first.requests);
  }, 600_000);
});
