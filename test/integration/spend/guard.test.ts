/**
 * The budget guard against real redis-server (and dynalite for the ledger), on a manual clock:
 * - even pacing: spend never runs ahead of E(t) by more than the float, and catches up as the
 *   day advances;
 * - every plan must pass: an exhausted arm plan blocks that arm only; an account plan caps all
 *   campaigns of the account together;
 * - a mid-day budget change takes effect from the remaining budget (spend is stored, the
 *   remainder derived);
 * - time zones: Pacific/Auckland and America/Los_Angeles campaigns roll their day at their own
 *   local midnight, on DST switch days too (23 h / 25 h days), and a win is booked on its bid's
 *   local day even when the notice arrives after midnight;
 * - the guard costs far less than one Redis command per bid;
 * - in-flight that no notice resolves (no loss notices) is released up to the guard's cap;
 * - sized by bids, a small plan's guard holds about one bid instead of a whole minimum float;
 * - a guard configured with another in-flight slot width than the plan-day's counters bids nothing
 *   and reports a SlotMismatchError (`spend.slot-mismatch`) to onError.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningEmulator, startDynalite } from '../../../local/emulators/aws.js';
import { type RunningRedis, startRedis } from '../../../local/emulators/redis.js';
import { provisionTables } from '../../../local/region.js';
import { dynamoDbClient } from '../../../shared/aws/clients.js';
import { parseDaypartText } from '../../../shared/budget/daypart.js';
import { type BudgetPlan, type CampaignBudgets, campaignBudgets } from '../../../shared/budget/model.js';
import { linearExpected } from '../../../shared/budget/pacing.js';
import { dayWindow } from '../../../shared/budget/time-zone.js';
import { connectRedis, type RedisClient } from '../../../shared/redis/connect.js';
import { physicalName, regionResources } from '../../../shared/region/resources.js';
import { BudgetGuard, type GuardBid, SlotMismatchError } from '../../../shared/spend/guard.js';
import { planDayKeys } from '../../../shared/spend/keys.js';
import { SpendLedger } from '../../../shared/spend/ledger.js';
import { readPlanDay } from '../../../shared/spend/live-counters.js';
import { Reconciler } from '../../../shared/spend/reconcile.js';
import { SpendTracker } from '../../../shared/spend/tracker.js';
import { HOUR_MS, ManualClock } from '../../../shared/time/clock.js';

let redisServer: RunningRedis;
let redis: RedisClient;
let dynalite: RunningEmulator;
let ledger: SpendLedger;

beforeAll(async () => {
  [redisServer, dynalite] = await Promise.all([startRedis(), startDynalite()]);
  const port = Number(redisServer.nodes[0]!.split(':')[1]);
  redis = connectRedis({ mode: 'standalone', nodes: [{ host: '127.0.0.1', port }], tls: false });
  const client = dynamoDbClient({ region: 'us-east-1', dynamodb: dynalite.url });
  await provisionTables(client);
  ledger = new SpendLedger({
    client,
    tableName: physicalName(regionResources.tables.spendLedger.suffix),
    region: 'us-east-1',
  });
});
afterAll(async () => {
  redis?.disconnect();
  await Promise.all([redisServer?.stop(), dynalite?.stop()]);
});

let n = 0;
/** Budgets of a fresh account/campaign (unique ids per test: one Redis for the file). */
function budgetsOf(
  timeZone: string,
  plans: (ids: { a: string; c: string }) => BudgetPlan[],
): CampaignBudgets {
  n++;
  const ids = { a: `a${n}`, c: `c${n}` };
  return campaignBudgets(
    { accountId: ids.a, name: ids.a, timeZone, currency: 'USD' },
    { campaignId: ids.c, accountId: ids.a, name: ids.c, status: 'active' },
    plans(ids),
  );
}

/** In-flight lifetime long enough that no bid of a test expires (bids here get no notices). */
const longInFlight = { ttlMs: 2 * 24 * HOUR_MS, slotMs: HOUR_MS };

function guardOf(clock: ManualClock, extra: Partial<ConstructorParameters<typeof BudgetGuard>[0]> = {}) {
  const inFlight = extra.inFlight ?? longInFlight;
  const reconciler = new Reconciler({ redis, ledger, clock, inFlight, campaignsOfAccount: async () => [] });
  const errors: unknown[] = [];
  const guard = new BudgetGuard({
    redis,
    clock,
    initPlanDay: (plan, day) => reconciler.reconcile(plan, day),
    onError: (e) => errors.push(e),
    ...extra,
    inFlight,
  });
  return { guard, errors };
}

/**
 * Bids until the guard says no `refusals` times in a row, its lease calls completed after each
 * (more than 2 where a refill is skipped while the plan's settle call is in flight); returns Σ of
 * bids made.
 */
async function bidUntilRefused(
  guard: BudgetGuard,
  bid: GuardBid,
  max = 1_000_000,
  refusals = 2,
): Promise<number> {
  let spent = 0;
  for (let i = 0; i < max; i++) {
    for (let refused = 0; guard.decide(bid) !== 'bid'; ) {
      if (++refused === refusals) return spent;
      await guard.idle();
    }
    spent += bid.priceMicros;
  }
  return spent;
}

describe('budget guard', () => {
  it('paces evenly: spend follows E(t) within one float', async () => {
    const tz = 'America/Los_Angeles';
    const clock = new ManualClock(Date.parse('2026-11-21T14:00:00Z')); // 06:00 local
    const b = budgetsOf(tz, ({ a, c }) => [
      { level: 'campaign', accountId: a, campaignId: c, dailyBudgetMicros: 100_000_000, pacingMode: 'even' },
    ]);
    const { guard, errors } = guardOf(clock);
    guard.setBudgets(b);
    const plan = b.common[0]!;
    const F = guard.floatOf(plan);
    const day = dayWindow(clock.now(), tz);
    const bid = { campaignId: b.campaign.campaignId, priceMicros: 100 };
    let spent = await bidUntilRefused(guard, bid);
    const e6 = linearExpected(100_000_000, day, clock.now());
    expect(spent).toBeLessThanOrEqual(e6);
    expect(spent).toBeGreaterThan(e6 - F - bid.priceMicros);
    clock.advance(3 * HOUR_MS); // 09:00 local
    spent += await bidUntilRefused(guard, bid);
    const e9 = linearExpected(100_000_000, day, clock.now());
    expect(spent).toBeLessThanOrEqual(e9);
    expect(spent).toBeGreaterThan(e9 - F - bid.priceMicros);
    // ≤ 10 Redis commands per 1,000 bids: one lease call per float (F = 200 bids here).
    expect(F / bid.priceMicros).toBe(200);
    expect((guard.stats.leaseCalls * 1000) / (spent / bid.priceMicros)).toBeLessThanOrEqual(10);
    expect(errors).toEqual([]);
    await guard.close();
  });

  it('prefetches below F/2: holds at most 1.5 F, one lease per F spent; a bid that does not fit fetches F', async () => {
    const clock = new ManualClock(Date.parse('2026-11-21T20:00:00Z')); // 12:00 in Los Angeles
    const b = budgetsOf('America/Los_Angeles', ({ a, c }) => [
      { level: 'campaign', accountId: a, campaignId: c, dailyBudgetMicros: 1_000_000, pacingMode: 'asap' },
    ]);
    const { guard, errors } = guardOf(clock, { minFloatMicros: 5_000 });
    guard.setBudgets(b);
    const plan = b.common[0]!;
    const F = guard.floatOf(plan);
    expect(F).toBe(5_000); // 0.5 % of $1: the float is what a small plan lags its curve by
    const floatNow = () =>
      guard.localState(plan, dayWindow(clock.now(), 'America/Los_Angeles').day)?.float ?? 0;
    await guard.warmUp(b.campaign.campaignId);
    expect(floatNow()).toBe(F);
    let maxHeld = 0;
    let spent = 0;
    for (let i = 0; i < 200; i++) {
      // 700 µ$ bids: not a divisor of F, so the float passes F/2 at varying points.
      if (guard.decide({ campaignId: b.campaign.campaignId, priceMicros: 700 }) === 'bid') spent += 700;
      await guard.idle();
      maxHeld = Math.max(maxHeld, floatNow());
      // Never more than F/2 + F (a lease of F asked for when the float fell below F/2).
      expect(floatNow()).toBeLessThan(1.5 * F);
    }
    expect(spent).toBe(200 * 700);
    expect(maxHeld).toBeGreaterThan(F);
    // One lease per F spent (plus the warm-up's): the prefetch point does not add calls.
    expect(guard.stats.leaseCalls).toBeLessThanOrEqual(Math.ceil(spent / F) + 2);
    // A bid larger than the float but above the prefetch point: refused once, and that fetches F.
    const guard2 = guardOf(clock, { minFloatMicros: 5_000 }).guard;
    guard2.setBudgets(b);
    await guard2.warmUp(b.campaign.campaignId);
    const state2 = () =>
      guard2.localState(plan, dayWindow(clock.now(), 'America/Los_Angeles').day)?.float ?? 0;
    expect(guard2.decide({ campaignId: b.campaign.campaignId, priceMicros: 2_000 })).toBe('bid'); // float 3,000 ≥ F/2
    expect(state2()).toBe(3_000);
    expect(guard2.decide({ campaignId: b.campaign.campaignId, priceMicros: 4_000 })).toBe('no-budget');
    await guard2.idle();
    expect(state2()).toBe(3_000 + F);
    expect(guard2.decide({ campaignId: b.campaign.campaignId, priceMicros: 4_000 })).toBe('bid');
    expect(() => guardOf(clock, { prefetchBelow: 0 })).toThrow(
      /prefetchBelow is 0: give a fraction of F in \(0, 1\]/,
    );
    expect(errors).toEqual([]);
    await guard.close();
    await guard2.close();
  });

  it('checks every plan: an exhausted arm blocks only its bids, the account caps all campaigns', async () => {
    const clock = new ManualClock(Date.parse('2026-11-21T12:00:00Z'));
    const b1 = budgetsOf('UTC', ({ a, c }) => [
      { level: 'account', accountId: a, dailyBudgetMicros: 3_000_000, pacingMode: 'asap' },
      { level: 'campaign', accountId: a, campaignId: c, dailyBudgetMicros: 2_000_000, pacingMode: 'asap' },
      {
        level: 'arm',
        accountId: a,
        campaignId: c,
        armId: 'A',
        dailyBudgetMicros: 500_000,
        pacingMode: 'asap',
      },
    ]);
    // A second campaign of the same account.
    const b2 = campaignBudgets(b1.account, { ...b1.campaign, campaignId: `${b1.campaign.campaignId}-2` }, [
      { level: 'account', accountId: b1.account.accountId, dailyBudgetMicros: 3_000_000, pacingMode: 'asap' },
      {
        level: 'campaign',
        accountId: b1.account.accountId,
        campaignId: `${b1.campaign.campaignId}-2`,
        dailyBudgetMicros: 2_000_000,
        pacingMode: 'asap',
      },
    ]);
    const { guard, errors } = guardOf(clock, { floatFraction: 0.01 });
    guard.setBudgets(b1);
    guard.setBudgets(b2);
    const c1 = b1.campaign.campaignId;
    const armSpent = await bidUntilRefused(guard, { campaignId: c1, armId: 'A', priceMicros: 1000 });
    expect(armSpent).toBeLessThanOrEqual(500_000);
    expect(armSpent).toBeGreaterThan(450_000);
    // Arm A is out; the campaign's other bids still go.
    expect(guard.decide({ campaignId: c1, armId: 'A', priceMicros: 1000 })).toBe('no-budget');
    const c1Spent = await bidUntilRefused(guard, { campaignId: c1, priceMicros: 1000 });
    expect(armSpent + c1Spent).toBeLessThanOrEqual(2_000_000);
    expect(armSpent + c1Spent).toBeGreaterThan(1_900_000);
    // The account plan (3,000,000) leaves ~1,000,000 for the second campaign, not its own 2,000,000.
    const c2Spent = await bidUntilRefused(guard, { campaignId: b2.campaign.campaignId, priceMicros: 1000 });
    expect(armSpent + c1Spent + c2Spent).toBeLessThanOrEqual(3_000_000);
    expect(c2Spent).toBeLessThan(1_100_000);
    expect(errors).toEqual([]);
    await guard.close();
  });

  it('releases in-flight that no notice resolves, up to its cap; releaseCap 0 counts it all', async () => {
    // An exchange without loss notices: every bid here is lost and never notified. After the
    // first slots died with all their bids still in flight (ρ = 1), the guard counts the live
    // in-flight less min(ρ × live bids, cap): it leases up to B + cap of raw commitments, never more.
    const inFlight = { ttlMs: 10 * 60_000, slotMs: 60_000 };
    const B = 10_000_000;
    for (const releaseCap of [0.01, 0]) {
      const clock = new ManualClock(Date.parse('2026-11-21T20:00:00Z')); // 12:00 in Los Angeles
      const b = budgetsOf('America/Los_Angeles', ({ a, c }) => [
        { level: 'campaign', accountId: a, campaignId: c, dailyBudgetMicros: B, pacingMode: 'asap' },
      ]);
      const { guard, errors } = guardOf(clock, { inFlight, releaseCap, minFloatMicros: 20_000 });
      guard.setBudgets(b);
      const plan = b.common[0]!;
      const state = planDayKeys(plan, dayWindow(clock.now(), plan.timeZone).day).state;
      const bid = { campaignId: b.campaign.campaignId, priceMicros: 10_000 };
      // 16 minutes of 10 bids a minute: slots of the first 6 minutes die with every bid in flight.
      for (let m = 0; m < 16; m++) {
        for (let i = 0; i < 10; i++) {
          let tries = 0;
          while (guard.decide(bid) !== 'bid') {
            expect(++tries, `minute ${m}: no float after the lease calls`).toBeLessThan(5);
            await guard.idle();
          }
        }
        await guard.maintain();
        clock.advance(60_000);
      }
      const learned = await readPlanDay(redis, state, clock.now());
      // ρ = 1: everything bid in the live slots is expected to stay unresolved.
      expect(learned.inFlightMicros).toBeGreaterThan(500_000);
      expect(learned.releasableMicros).toBe(learned.inFlightMicros);
      // Refused three times in a row: a refill is skipped while the plan's settle call is in flight.
      await bidUntilRefused(guard, bid, 2 * (B / bid.priceMicros), 3);
      await guard.idle();
      await guard.maintain();
      const end = await readPlanDay(redis, state, clock.now());
      const raw = end.confirmedMicros + end.leasedMicros + end.inFlightMicros;
      const cap = Math.floor(releaseCap * B);
      const F = guard.floatOf(plan);
      expect(raw).toBeLessThanOrEqual(B + cap);
      expect(raw).toBeGreaterThan(B + cap - F - bid.priceMicros);
      expect(errors).toEqual([]);
      await guard.close();
    }
  });

  it('an even plan mid-day releases up to the headroom over E(t), never past B + cap', async () => {
    // The worst case for the release: every bid is in flight with no notice (ρ = 1), and then all
    // of them turn out to be wins. At noon E is half the budget, so the guard may count the live
    // in-flight less by cap × B plus B − E: what it commits for real reaches B + cap and no more.
    const inFlight = { ttlMs: 10 * 60_000, slotMs: 60_000 };
    const B = 10_000_000;
    const releaseCap = 0.01;
    const clock = new ManualClock(Date.parse('2026-11-21T20:00:00Z')); // 12:00 in Los Angeles
    const b = budgetsOf('America/Los_Angeles', ({ a, c }) => [
      { level: 'campaign', accountId: a, campaignId: c, dailyBudgetMicros: B, pacingMode: 'even' },
    ]);
    const { guard, errors } = guardOf(clock, { inFlight, releaseCap, minFloatMicros: 20_000 });
    guard.setBudgets(b);
    const plan = b.common[0]!;
    const day = dayWindow(clock.now(), plan.timeZone);
    const state = planDayKeys(plan, day.day).state;
    const bid = { campaignId: b.campaign.campaignId, priceMicros: 10_000 };
    // 14 minutes of 10 bids a minute: the first slots die with every bid in flight, so ρ = 1.
    for (let m = 0; m < 14; m++) {
      for (let i = 0; i < 10; i++) {
        while (guard.decide(bid) !== 'bid') await guard.idle();
      }
      await guard.maintain();
      clock.advance(60_000);
    }
    const before = await readPlanDay(redis, state, clock.now());
    expect(before.releasableMicros).toBe(before.inFlightMicros);
    await bidUntilRefused(guard, bid, 2 * (B / bid.priceMicros), 3);
    await guard.idle();
    await guard.maintain();
    const end = await readPlanDay(redis, state, clock.now());
    const raw = end.confirmedMicros + end.leasedMicros + end.inFlightMicros;
    const E = linearExpected(B, day, clock.now());
    const cap = Math.floor(releaseCap * B);
    const F = guard.floatOf(plan);
    expect(E).toBeLessThan(0.55 * B);
    // What every bid in flight would cost if each one won: within B + cap, reached to a float and
    // a bid (without the headroom the guard stops at E + cap, about half of that).
    expect(raw).toBeLessThanOrEqual(B + cap);
    expect(raw).toBeGreaterThan(B + cap - F - bid.priceMicros);
    expect(errors).toEqual([]);
    await guard.close();
  });

  it('floatSizing bids: a small plan’s guard holds about two recent bids instead of a whole F', async () => {
    // $1.50 a day, F = the 50,000 µ$ minimum float (3.3 % of the day); bids of 6,000–9,000.
    const held: Record<string, number[]> = {};
    for (const floatSizing of ['fixed', 'bids'] as const) {
      const clock = new ManualClock(Date.parse('2026-11-21T20:00:00Z'));
      const b = budgetsOf('America/Los_Angeles', ({ a, c }) => [
        { level: 'campaign', accountId: a, campaignId: c, dailyBudgetMicros: 1_500_000, pacingMode: 'asap' },
      ]);
      const { guard, errors } = guardOf(clock, { minFloatMicros: 50_000, floatSizing });
      guard.setBudgets(b);
      const plan = b.common[0]!;
      const state = planDayKeys(plan, dayWindow(clock.now(), plan.timeZone).day).state;
      const seen: number[] = [];
      let refused = 0;
      for (let i = 0; i < 60; i++) {
        const bid = { campaignId: b.campaign.campaignId, priceMicros: 6_000 + ((i * 7919) % 3_001) };
        if (guard.decide(bid) !== 'bid') refused++;
        await guard.idle();
        clock.advance(5_000);
        const live = await readPlanDay(redis, state, clock.now());
        // The first lease, before any bid was seen, is a whole F (about six bids here).
        if (i >= 10) seen.push(live.leasedMicros);
      }
      held[floatSizing] = seen;
      // Both keep bidding: at most the first bids wait for a lease.
      expect(errors).toEqual([]);
      expect(refused, floatSizing).toBeLessThanOrEqual(3);
      expect(errors).toEqual([]);
      await guard.close();
    }
    const mean = (xs: number[]) => xs.reduce((a, x) => a + x, 0) / xs.length;
    // Fixed: between F/2 and 1.5 F. Sized by bids: at most three of the largest recent bid.
    expect(mean(held.fixed!)).toBeGreaterThan(25_000);
    expect(Math.max(...held.bids!)).toBeLessThanOrEqual(3 * 9_000);
    expect(mean(held.bids!)).toBeLessThan(mean(held.fixed!) / 2);
  });

  it('spends a flight day up to its share of the flight, a closed day raising the next; nothing outside it', async () => {
    // Day 3 of a 4-day $4 flight with a $2 cap, in UTC.
    const clock = new ManualClock(Date.parse('2026-12-03T12:00:00Z'));
    const flight = { startDay: '2026-12-01', endDay: '2026-12-04', budgetMicros: 4_000_000 };
    const mk =
      (flightSpent: Record<string, { micros: number; at: number }>) =>
      (ids: { a: string; c: string }): BudgetPlan[] => [
        {
          level: 'campaign',
          accountId: ids.a,
          campaignId: ids.c,
          dailyBudgetMicros: 2_000_000,
          pacingMode: 'asap',
          flight,
          flightSpent,
        },
      ];
    // Day 1 spent $1.50, day 2 is not closed yet (counted at the $2 cap): ($4 − $3.50) / 2 = $0.25.
    const b = budgetsOf('UTC', mk({ '2026-12-01': { micros: 1_500_000, at: 0 } }));
    const { guard, errors } = guardOf(clock, { floatFraction: 0.01, minFloatMicros: 1_000 });
    guard.setBudgets(b);
    const bid = { campaignId: b.campaign.campaignId, priceMicros: 1_000 };
    const first = await bidUntilRefused(guard, bid);
    expect(first).toBeLessThanOrEqual(250_000);
    expect(first).toBeGreaterThan(240_000);
    // Day 2 closes at $0.20 spent: ($4 − $1.70) / 2 = $1.15 for today.
    const closed = { '2026-12-01': { micros: 1_500_000, at: 0 }, '2026-12-02': { micros: 200_000, at: 0 } };
    guard.setBudgets(
      campaignBudgets(
        b.account,
        b.campaign,
        mk(closed)({ a: b.account.accountId, c: b.campaign.campaignId }),
      ),
    );
    clock.advance(1_000);
    const second = await bidUntilRefused(guard, bid);
    expect(first + second).toBeLessThanOrEqual(1_150_000);
    expect(first + second).toBeGreaterThan(1_140_000);
    // After the flight's last day: nothing, whatever is left.
    clock.set(Date.parse('2026-12-05T12:00:00Z'));
    expect(await bidUntilRefused(guard, bid)).toBe(0);
    expect(errors).toEqual([]);
    await guard.close();
  });

  it('bids a dayparted plan only inside its windows, its floats held back outside them', async () => {
    // Friday 2026-03-06 in Los Angeles, windows 08:00-12:00 and 14:00-16:00 local; an even plan on
    // the fail-safe curve (nothing published): linear over the 6 open hours.
    const tz = 'America/Los_Angeles';
    const clock = new ManualClock(Date.parse('2026-03-06T07:59:00-08:00'));
    const b = budgetsOf(tz, ({ a, c }) => [
      {
        level: 'campaign',
        accountId: a,
        campaignId: c,
        dailyBudgetMicros: 6_000_000,
        pacingMode: 'even',
        daypart: parseDaypartText('fri 08:00-12:00; fri 14:00-16:00'),
      },
    ]);
    const { guard, errors } = guardOf(clock, { floatFraction: 0.01, minFloatMicros: 1_000 });
    guard.setBudgets(b);
    const bid = { campaignId: b.campaign.campaignId, priceMicros: 1_000 };
    expect(await bidUntilRefused(guard, bid)).toBe(0);
    const refusedBefore = guard.stats.windowRefusals;
    expect(refusedBefore).toBeGreaterThan(0);
    clock.set(Date.parse('2026-03-06T10:00:00-08:00')); // 2 of 6 open hours: $2
    let spent = await bidUntilRefused(guard, bid);
    expect(spent).toBeLessThanOrEqual(2_000_000);
    expect(spent).toBeGreaterThan(1_980_000);
    // 12:00-14:00 closed: the floats it still holds are not spent, E stays at $4.
    clock.set(Date.parse('2026-03-06T12:30:00-08:00'));
    expect(await bidUntilRefused(guard, bid)).toBe(0);
    expect(guard.stats.windowRefusals).toBeGreaterThan(refusedBefore);
    clock.set(Date.parse('2026-03-06T13:59:59-08:00'));
    expect(await bidUntilRefused(guard, bid)).toBe(0);
    clock.set(Date.parse('2026-03-06T14:00:00-08:00'));
    spent += await bidUntilRefused(guard, bid);
    expect(spent).toBeLessThanOrEqual(4_000_000);
    expect(spent).toBeGreaterThan(3_980_000);
    clock.set(Date.parse('2026-03-06T16:00:00-08:00'));
    expect(await bidUntilRefused(guard, bid)).toBe(0);
    expect(errors).toEqual([]);
    await guard.close();
  });

  it('applies a mid-day budget change to the remaining budget', async () => {
    const clock = new ManualClock(Date.parse('2026-11-21T12:00:00Z'));
    const mk =
      (budget: number) =>
      (ids: { a: string; c: string }): BudgetPlan[] => [
        {
          level: 'campaign',
          accountId: ids.a,
          campaignId: ids.c,
          dailyBudgetMicros: budget,
          pacingMode: 'asap',
        },
      ];
    const b = budgetsOf('UTC', mk(1_000_000));
    const { guard } = guardOf(clock, { floatFraction: 0.01 });
    guard.setBudgets(b);
    const bid = { campaignId: b.campaign.campaignId, priceMicros: 1000 };
    const first = await bidUntilRefused(guard, bid);
    expect(first).toBeGreaterThan(950_000);
    // Raised to 1.5 M: only the 0.5 M not yet spent is available.
    guard.setBudgets(
      campaignBudgets(
        b.account,
        b.campaign,
        mk(1_500_000)({ a: b.account.accountId, c: b.campaign.campaignId }),
      ),
    );
    clock.advance(1000);
    const second = await bidUntilRefused(guard, bid);
    expect(first + second).toBeLessThanOrEqual(1_500_000);
    expect(second).toBeGreaterThan(450_000);
    expect(second).toBeLessThanOrEqual(1_500_000 - first);
    // Lowered below what is spent: nothing more.
    guard.setBudgets(
      campaignBudgets(
        b.account,
        b.campaign,
        mk(800_000)({ a: b.account.accountId, c: b.campaign.campaignId }),
      ),
    );
    clock.advance(1000);
    expect(await bidUntilRefused(guard, bid)).toBe(0);
    await guard.close();
  });

  it.each([
    // zone, instant of a local midnight (UTC), the new local day, its length in hours
    ['Pacific/Auckland', '2026-09-26T12:00:00Z', '2026-09-27', 23],
    ['Pacific/Auckland', '2026-04-04T11:00:00Z', '2026-04-05', 25],
    ['America/Los_Angeles', '2026-03-08T08:00:00Z', '2026-03-08', 23],
    ['America/Los_Angeles', '2026-11-01T07:00:00Z', '2026-11-01', 25],
  ])('%s rolls its budget day at local midnight %s into %s (%i h)', async (tz, midnight, newDay, hours) => {
    const t0 = Date.parse(midnight);
    const clock = new ManualClock(t0 - 1);
    const b = budgetsOf(tz, ({ a, c }) => [
      { level: 'campaign', accountId: a, campaignId: c, dailyBudgetMicros: 10_000_000, pacingMode: 'asap' },
    ]);
    // The other zone's campaign, bidding at the same instants, must not roll.
    const otherTz = tz === 'Pacific/Auckland' ? 'America/Los_Angeles' : 'Pacific/Auckland';
    const other = budgetsOf(otherTz, ({ a, c }) => [
      { level: 'campaign', accountId: a, campaignId: c, dailyBudgetMicros: 10_000_000, pacingMode: 'asap' },
    ]);
    const { guard, errors } = guardOf(clock, { floatFraction: 0.01 });
    guard.setBudgets(b);
    guard.setBudgets(other);
    const oldDay = dayWindow(t0 - 1, tz).day;
    const otherDay = dayWindow(t0 - 1, otherTz).day;
    const plan = b.common[0]!;
    const otherPlan = other.common[0]!;
    // Spend the whole old day's budget just before midnight.
    await bidUntilRefused(guard, { campaignId: b.campaign.campaignId, priceMicros: 10_000 });
    await bidUntilRefused(guard, { campaignId: other.campaign.campaignId, priceMicros: 10_000 });
    expect(guard.decide({ campaignId: b.campaign.campaignId, priceMicros: 10_000 })).toBe('no-budget');
    clock.set(t0);
    // New local day: a fresh budget for this zone, still the old day for the other zone.
    expect(
      await bidUntilRefused(guard, { campaignId: b.campaign.campaignId, priceMicros: 10_000 }),
    ).toBeGreaterThan(9_000_000);
    expect(await bidUntilRefused(guard, { campaignId: other.campaign.campaignId, priceMicros: 10_000 })).toBe(
      0,
    );
    expect(dayWindow(t0, otherTz).day).toBe(otherDay);
    expect(await redis.exists(planDayKeys(plan, oldDay).state, planDayKeys(plan, newDay).state)).toBe(2);
    const snapNew = await readPlanDay(redis, planDayKeys(plan, newDay).state, clock.now());
    const snapOld = await readPlanDay(redis, planDayKeys(plan, oldDay).state, clock.now());
    expect(snapNew.leasedMicros + snapNew.inFlightMicros).toBeGreaterThan(9_000_000);
    expect(snapOld.leasedMicros + snapOld.inFlightMicros).toBeLessThanOrEqual(10_000_000);
    expect(dayWindow(t0, tz).endMs - t0).toBe(hours * HOUR_MS);
    expect(errors).toEqual([]);
    await guard.close();

    // track-spend books a win on its bid's local day, even when the notice comes after midnight.
    const reconciler = new Reconciler({
      redis,
      ledger,
      clock,
      inFlight: longInFlight,
      campaignsOfAccount: async () => [],
    });
    const tracker = new SpendTracker({
      redis,
      ledger,
      reconciler,
      clock,
      inFlight: longInFlight,
      budgets: async () => b,
    });
    clock.set(t0 + 60_000);
    const base = {
      v: 1 as const,
      campaignId: b.campaign.campaignId,
      bidPriceMicros: 10_000,
      at: t0 + 60_000,
    };
    await tracker.apply({ ...base, type: 'win', bidId: 'before', bidAt: t0 - 1, clearingPriceMicros: 7000 });
    await tracker.apply({ ...base, type: 'win', bidId: 'after', bidAt: t0, clearingPriceMicros: 8000 });
    expect((await ledger.entries(b.campaign.campaignId, oldDay)).map((e) => e.bidId)).toEqual(['before']);
    expect((await ledger.entries(b.campaign.campaignId, newDay)).map((e) => e.bidId)).toEqual(['after']);
    expect((await readPlanDay(redis, planDayKeys(plan, oldDay).state, clock.now())).confirmedMicros).toBe(
      7000,
    );
    expect((await readPlanDay(redis, planDayKeys(plan, newDay).state, clock.now())).confirmedMicros).toBe(
      8000,
    );
    expect(otherPlan.timeZone).toBe(otherTz);
  });
  it('tells a refusal the allocation caused from one E(t) caused (several regions)', async () => {
    const tz = 'America/Los_Angeles';
    const clock = new ManualClock(Date.parse('2026-11-21T20:00:00Z')); // 12:00 local: E = B / 2
    const mk = () =>
      budgetsOf(tz, ({ a, c }) => [
        { level: 'campaign', accountId: a, campaignId: c, dailyBudgetMicros: 10_000_000, pacingMode: 'even' },
      ]);
    const capped = mk();
    const paced = mk();
    const { guard, errors } = guardOf(clock, { allocations: 'strict' });
    guard.setBudgets(capped);
    guard.setBudgets(paced);
    const day = dayWindow(clock.now(), tz).day;
    // The region holds 200,000 µ$ of the first plan (E ≈ 5,000,000 µ$ would allow far more) and the
    // whole budget of the second (its E caps it).
    const write = (b: CampaignBudgets, a: number) =>
      redis.hset(planDayKeys(b.common[0]!, day).state, { a, ae: clock.now() + 60_000 });
    await write(capped, 200_000);
    await write(paced, 10_000_000);
    const bid = (b: CampaignBudgets) => ({ campaignId: b.campaign.campaignId, priceMicros: 1_000 });
    const spentCapped = await bidUntilRefused(guard, bid(capped));
    expect(spentCapped).toBeLessThanOrEqual(200_000);
    expect(guard.stats.allocationHolds).toBeGreaterThan(0);
    expect(guard.stats.allocationRefusals).toBeGreaterThan(0);
    const refusals = guard.stats.allocationRefusals;
    const spentPaced = await bidUntilRefused(guard, bid(paced));
    expect(spentPaced).toBeGreaterThan(200_000);
    // refused by E(t), not by the allocation: not counted
    expect(guard.stats.allocationRefusals).toBe(refusals);
    expect(errors).toEqual([]);
    await guard.close();
  });

  it('a guard with another slot width than the plan-day bids nothing and reports SlotMismatchError', async () => {
    const clock = new ManualClock(Date.parse('2026-11-21T12:00:00Z'));
    const b = budgetsOf('UTC', ({ a, c }) => [
      { level: 'campaign', accountId: a, campaignId: c, dailyBudgetMicros: 10_000_000, pacingMode: 'asap' },
    ]);
    const bid = { campaignId: b.campaign.campaignId, priceMicros: 1_000 };
    // The first guard initialises the plan-day's counters with 1-hour slots.
    const first = guardOf(clock);
    first.guard.setBudgets(b);
    expect(await bidUntilRefused(first.guard, bid, 10)).toBeGreaterThan(0);
    await first.guard.close();
    const other = guardOf(clock, { inFlight: { ttlMs: longInFlight.ttlMs, slotMs: 30 * 60_000 } });
    other.guard.setBudgets(b);
    expect(await bidUntilRefused(other.guard, bid)).toBe(0);
    expect(other.errors.length).toBeGreaterThan(0);
    for (const e of other.errors) {
      expect(e).toBeInstanceOf(SlotMismatchError);
      expect((e as SlotMismatchError).code).toBe('spend.slot-mismatch');
      expect((e as Error).message).toMatch(
        /uses 3600000 ms slots but this guard is configured for 1800000 ms: give every guard/,
      );
    }
    expect(first.errors).toEqual([]);
    await other.guard.close();
  });
});
