/**
 * The overshoot bound, proven against real Redis with real concurrency: 2 OS processes × 4
 * BudgetGuard instances (8 guards) bid for a whole simulated day (~24 s real) on campaigns with a
 * $1 and a $1,000 daily budget, win rates 10 % and 90 %, ASAP pacing (E(t) = budget all day: the
 * hardest case for the cap), win notices delayed up to the exchange deadline and 5 % never sent.
 * Demand is 1.5× what the budget can buy. Notices go through the real SpendTracker.
 *
 * For every campaign: confirmed spend (the live counter, cross-checked against the sum of the
 * wins the children booked) must not exceed the cap by more than the stated bound
 * (docs/spend.md): L_T + R·N·K·F, with L_T the wins applied later than T after their bid, R the
 * resets of the plan-day, N guards, K = 2 floats per guard and plan, F the float. The one-reset
 * term N·K·F must be ≤ 0.5 % of the budget for the $1,000 campaigns. Run twice: without a reset
 * (R = 0), and with the counters' redis-server restarted empty at 70 % of the day, after the ASAP
 * campaigns reached their cap (R = 1).
 */
import { spawn } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { type RunningRedis, startRedis } from '../../../local/emulators/redis.js';
import { resolvePlan } from '../../../shared/budget/model.js';
import { dayWindow } from '../../../shared/budget/time-zone.js';
import { connectRedis, type RedisClient } from '../../../shared/redis/connect.js';
import { planDayKeys } from '../../../shared/spend/keys.js';
import { readPlanDay } from '../../../shared/spend/live-counters.js';
import type { BidderConfig, BidderReport } from '../../fixtures/spend/bidder.js';

const PROCESSES = 2;
const GUARDS_PER_PROCESS = 4;
const N = PROCESSES * GUARDS_PER_PROCESS;
/** Floats a guard can hold per plan: below F it prefetches one more F, so it holds < 2F. */
const K = 2;
const FLOAT_FRACTION = 0.0002;
const MIN_FLOAT = 1000;
const REAL_DAY_MS = 24_000;
const MINUTE = 60_000;
const TZ = 'UTC';

const started: RunningRedis[] = [];
const clients: RedisClient[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) c.disconnect();
  await Promise.all(started.splice(0).map((r) => r.stop()));
});

const portOf = (r: RunningRedis) => Number(r.nodes[0]?.split(':')[1]);

function runChild(config: BidderConfig): Promise<BidderReport> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', 'test/fixtures/spend/bidder.ts', JSON.stringify(config)],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => {
      out += d;
    });
    child.stderr.on('data', (d) => {
      err += d;
    });
    child.on('exit', (code) => {
      const line = out.trim().split('\n').pop() ?? '';
      if (code !== 0 || !line.startsWith('{'))
        reject(new Error(`bidder ${config.id} exited ${code}: ${err}`));
      else resolve(JSON.parse(line) as BidderReport);
    });
  });
}

async function scenario(resetAtDayFraction: number | undefined) {
  const [counters, ledger] = await Promise.all([startRedis(), startRedis()]);
  started.push(counters, ledger);
  const client = connectRedis({
    mode: 'standalone',
    nodes: [{ host: '127.0.0.1', port: portOf(counters) }],
    tls: false,
  });
  client.on('error', () => {});
  clients.push(client);
  const simStart = Date.parse('2026-11-21T00:00:00Z');
  const day = dayWindow(simStart, TZ);
  const speed = (day.endMs - day.startMs) / REAL_DAY_MS;
  // T = notice deadline (5 min) + processing margin: the children's event loops lag under load.
  const inFlight = { ttlMs: 30 * MINUTE, slotMs: 3 * MINUTE };
  const campaigns: BidderConfig['campaigns'][number][] = [];
  for (const budgetMicros of [1_000_000, 1_000_000_000]) {
    for (const winRate of [0.1, 0.9]) {
      const F = Math.max(MIN_FLOAT, Math.floor(budgetMicros * FLOAT_FRACTION));
      // About 8 bids per float (real floats hold far more; this keeps the test at ~25 s).
      const avgBidMicros = Math.floor(F / 8);
      const winsToSpend = budgetMicros / (0.75 * avgBidMicros);
      campaigns.push({
        campaignId: `c-${budgetMicros / 1_000_000}usd-${winRate * 100}pct`,
        budgetMicros,
        winRate,
        pacingMode: 'asap',
        avgBidMicros,
        offersPerSimMs: (1.5 * winsToSpend) / winRate / (day.endMs - day.startMs),
      });
    }
  }
  const realStart = Date.now() + 2500;
  const base = {
    redisPort: portOf(counters),
    ledgerPort: portOf(ledger),
    realStart,
    simStart,
    speed,
    stopBiddingAt: day.endMs - 1,
    stopAt: day.endMs + 10 * MINUTE,
    guards: GUARDS_PER_PROCESS,
    totalGuards: N,
    inFlight,
    noticeDeadlineMs: 5 * MINUTE,
    lostNoticeRate: 0.05,
    lossNoticeRate: 0.1,
    floatFraction: FLOAT_FRACTION,
    minFloatMicros: MIN_FLOAT,
    timeZone: TZ,
    campaigns,
  };
  const children = Array.from({ length: PROCESSES }, (_, id) => runChild({ ...base, id, seed: 1000 + id }));
  if (resetAtDayFraction !== undefined) {
    await new Promise((r) => setTimeout(r, realStart + resetAtDayFraction * REAL_DAY_MS - Date.now()));
    await counters.restart();
  }
  const reports = await Promise.all(children);
  for (const r of reports) expect(r.errors).toEqual([]);

  const rows = [];
  const checks: (() => void)[] = [];
  const resets = resetAtDayFraction === undefined ? 0 : 1;
  for (const c of campaigns) {
    const plan = resolvePlan(
      {
        level: 'campaign',
        accountId: 'acc-o',
        campaignId: c.campaignId,
        dailyBudgetMicros: c.budgetMicros,
        pacingMode: 'asap',
      },
      TZ,
    );
    const snap = await readPlanDay(client, planDayKeys(plan, day.day).state, day.endMs + 60 * MINUTE);
    const applied = reports.reduce((a, r) => a + (r.appliedMicros[c.campaignId] ?? 0), 0);
    const late = reports.reduce((a, r) => a + (r.lateMicros[c.campaignId] ?? 0), 0);
    const F = Math.max(MIN_FLOAT, Math.floor(c.budgetMicros * FLOAT_FRACTION));
    const bound = late + resets * N * K * F;
    const overshoot = Math.max(0, snap.confirmedMicros - c.budgetMicros);
    rows.push({
      campaign: c.campaignId,
      spentPct: +((100 * snap.confirmedMicros) / c.budgetMicros).toFixed(3),
      overshootPct: +((100 * overshoot) / c.budgetMicros).toFixed(4),
      boundPct: +((100 * bound) / c.budgetMicros).toFixed(4),
      latePct: +((100 * late) / c.budgetMicros).toFixed(4),
      bids: reports.reduce((a, r) => a + (r.bids[c.campaignId] ?? 0), 0),
    });
    checks.push(() => {
      // The live counter is exactly the booked wins (nothing lost or doubled, reset or not).
      expect(snap.confirmedMicros).toBe(applied);
      expect(overshoot).toBeLessThanOrEqual(bound);
      if (c.budgetMicros === 1_000_000_000) expect(N * K * F).toBeLessThanOrEqual(0.005 * c.budgetMicros);
      // Not trivially safe by never spending: the 90 % campaigns reach their cap. The 10 % ones
      // converge more slowly (unnotified losses stay in flight for T at weight 1) and, on this
      // shared machine, with fewer bids than planned: only a floor is asserted for them.
      expect(snap.confirmedMicros).toBeGreaterThan((c.winRate > 0.5 ? 0.95 : 0.5) * c.budgetMicros);
    });
  }
  console.log(
    JSON.stringify({
      resets,
      rows,
      maxNoticeLagMs: Math.max(...reports.map((r) => r.maxNoticeLagMs)),
      leaseCalls: reports.map((r) => r.leaseCalls),
      rejoins: reports.map((r) => r.rejoins),
      retries: reports.map((r) => r.retries),
    }),
  );
  for (const check of checks) check();
  return reports;
}

describe('budget guard overshoot', () => {
  it('8 guards in 2 processes stay within the stated bound for $1 and $1,000 budgets', async () => {
    await scenario(undefined);
  }, 90_000);

  it('stays within the bound when the counters Redis restarts empty at 70 % of the day', async () => {
    const reports = await scenario(0.7);
    // Every guard noticed the reset and re-registered its in-flight amounts.
    expect(reports.reduce((a, r) => a + r.rejoins, 0)).toBeGreaterThanOrEqual(N);
  }, 90_000);
});
