/**
 * Flights across two local regions (docs/spend.md, "Flights"): wins booked by both regions'
 * track-spend on a flight day are closed by the home region's pacer — with the pacer function's
 * credentials, held to its synthesized policy — into the plan's `flightSpent` (every region's
 * wins, each once), replicated to the other region; the next day's budget takes what the flight
 * has left; a win notice that arrives after the close is taken in by the re-close a day later; the
 * other region's pacer closes nothing; a plan write keeps the closed days. Manual clock.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalRegion } from '../../../local/region.js';
import { getPlan } from '../../../shared/budget/allocation-home.js';
import { dayBudgetMicros } from '../../../shared/budget/flight.js';
import type { BudgetPlan } from '../../../shared/budget/model.js';
import { BudgetRepository } from '../../../shared/budget/repository.js';
import { addDays, dayWindow } from '../../../shared/budget/time-zone.js';
import type { PacingController } from '../../../shared/pacing/controller/api.js';
import { createPacingController } from '../../../shared/pacing/controller/index.js';
import type { WinEvent } from '../../../shared/spend/events.js';
import { type SpendRuntime, spendRuntimeFromEnv } from '../../../shared/spend/runtime.js';
import { ManualClock } from '../../../shared/time/clock.js';
import { accountsInShard } from '../pacing/support.js';
import {
  REGION_A,
  REGION_B,
  type RegionalInstance,
  regionalInstance,
  startTwoRegions,
  type TwoRegions,
} from './support.js';

const LAG = 1_000;
const TICK = 10_000;
const SHARD = 1;
const TZ = 'America/Chicago';
/** Noon in Chicago on the flight's first day. */
const T0 = Date.UTC(2026, 11, 1, 18, 0, 0);
const DAY1 = dayWindow(T0, TZ);
const $ = 1_000_000;
const FLIGHT = { startDay: DAY1.day, endDay: addDays(DAY1.day, 2), budgetMicros: 6 * $ };
const CAP = 3 * $;
const clock = new ManualClock(T0 - 60_000);
const controller = createPacingController() as PacingController<unknown, unknown>;
const campaignId = 'flt-c';
let accountId: string;
let two: TwoRegions;
let repo: BudgetRepository;
const spend: Record<string, SpendRuntime> = {};
const pacers: Record<string, RegionalInstance> = {};

const regionOf = (name: string) => two.regions[name] as LocalRegion;
const plan = (): BudgetPlan => ({
  level: 'campaign',
  accountId,
  campaignId,
  dailyBudgetMicros: CAP,
  pacingMode: 'even',
  flight: FLIGHT,
});

beforeAll(async () => {
  two = await startTwoRegions(clock, LAG);
  for (const r of Object.values(two.redis)) r.on('error', () => {});
  const a = regionOf(REGION_A);
  const shards = a.description.settings.pacer.shards;
  [accountId] = accountsInShard(SHARD, shards, 1, 'flt') as [string];
  repo = new BudgetRepository({ client: a.dynamodb, tableName: a.tableName('budgets'), pacerShards: shards });
  await repo.putAccount({ accountId, name: accountId, timeZone: TZ, currency: 'USD' });
  await repo.putCampaign({ campaignId, accountId, name: campaignId, status: 'active' });
  await repo.putPlan(plan());
  await two.link.flush();
  for (const name of [REGION_A, REGION_B]) {
    const r = regionOf(name);
    spend[name] = spendRuntimeFromEnv({
      dynamodb: r.dynamodb,
      clock,
      onRedisError: () => {},
      env: r.functionEnv('trackSpend'),
    });
    pacers[name] = regionalInstance({
      two,
      region: name,
      shard: SHARD,
      instance: 0,
      clock,
      controller,
      tickMs: TICK,
    });
  }
  clock.set(T0);
}, 60_000);

afterAll(async () => {
  for (const s of Object.values(spend)) s.redis.disconnect();
  for (const p of Object.values(pacers)) p.close();
  await two?.stop();
});

let bidNo = 0;
/** Books `n` wins of bids made at `bidAt` in `region` (its track-spend); returns their total. */
async function book(region: string, n: number, bidAt: number): Promise<number> {
  let micros = 0;
  for (let i = 0; i < n; i++) {
    const price = 1_000 + ((++bidNo * 37) % 900);
    const event: WinEvent = {
      v: 1,
      type: 'win',
      bidId: `${region}-f${bidNo}`,
      campaignId,
      bidAt,
      bidPriceMicros: price + 500,
      at: clock.now(),
      clearingPriceMicros: price,
    };
    expect((await (spend[region] as SpendRuntime).tracker.apply(event)).addedMicros).toBe(price);
    micros += price;
  }
  return micros;
}

/** Ticks both regions' pacers and waits for their flight closers' passes. */
async function tickBoth(): Promise<void> {
  const tick = Math.floor(clock.now() / TICK);
  for (const name of [REGION_A, REGION_B]) {
    const p = pacers[name] as RegionalInstance;
    await p.tick(tick);
    // The pass runs beside the tick: a second kick waits for nothing, so poll `last`.
    for (let i = 0; i < 200 && p.wiring.flights?.last?.atMs !== clock.now(); i++) {
      await new Promise((r) => setTimeout(r, 10));
    }
  }
  clock.advance(LAG);
  await two.link.deliverDue();
}

const stored = async (region: string) =>
  (await getPlan(
    { client: regionOf(region).dynamodb, tableName: regionOf(region).tableName('budgets') },
    plan(),
  )) as BudgetPlan;

describe('flight closes across regions', () => {
  let day1 = 0;

  it("closes a day with every region's wins, once, at the home region; the next day takes the rest", async () => {
    day1 = (await book(REGION_A, 5, T0 - 1_000)) + (await book(REGION_B, 4, T0 - 1_000));
    await two.link.flush();
    // 10 minutes after midnight: not due yet (in-flight bids may still be notified).
    clock.set(DAY1.endMs + 10 * 60_000);
    await tickBoth();
    expect((await stored(REGION_A)).flightSpent).toBeUndefined();
    // Unclosed, day 1 counts at the whole cap: day 2 gets (6 − 3) / 2.
    expect(dayBudgetMicros(await stored(REGION_A), addDays(DAY1.day, 1))).toBe(1.5 * $);
    clock.set(DAY1.endMs + 16 * 60_000);
    await tickBoth();
    for (const region of [REGION_A, REGION_B]) {
      const p = await stored(region);
      expect(p.flightSpent?.[DAY1.day]?.micros).toBe(day1);
      expect(dayBudgetMicros(p, addDays(DAY1.day, 1))).toBe(Math.floor((FLIGHT.budgetMicros - day1) / 2));
    }
    expect(pacers[REGION_A]?.wiring.flights?.last).toMatchObject({ due: 1, closed: 1, unclosed: 0 });
    // Region B is not the plan's home: its closer has nothing to close.
    expect(pacers[REGION_B]?.wiring.flights?.last).toMatchObject({ due: 0, closed: 0 });
  });

  it('keeps the closed days through a plan write, and re-closes a day later with late notices', async () => {
    await repo.putPlan({ ...plan(), pacingMode: 'ahead' });
    expect((await stored(REGION_A)).flightSpent?.[DAY1.day]?.micros).toBe(day1);
    // A billing notice of a day-1 bid, hours late.
    clock.set(DAY1.endMs + 5 * 3_600_000);
    const late = await book(REGION_B, 1, T0);
    await two.link.flush();
    await tickBoth();
    expect((await stored(REGION_A)).flightSpent?.[DAY1.day]?.micros).toBe(day1);
    clock.set(DAY1.endMs + 24 * 3_600_000 + 16 * 60_000);
    await tickBoth();
    const p = await stored(REGION_B);
    expect(p.flightSpent?.[DAY1.day]?.micros).toBe(day1 + late);
    // Day 2 was closed too (nothing spent): the last day may take the rest, up to the cap.
    expect(p.flightSpent?.[addDays(DAY1.day, 1)]?.micros).toBe(0);
    expect(dayBudgetMicros(p, FLIGHT.endDay)).toBe(CAP);
  });
});
