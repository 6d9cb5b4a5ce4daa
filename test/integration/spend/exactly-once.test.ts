import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalRegion, startLocalRegion } from '../../../local/region.js';
import { resolvePlan } from '../../../shared/budget/model.js';
import { BudgetRepository } from '../../../shared/budget/repository.js';
import { dayWindow } from '../../../shared/budget/time-zone.js';
import { DeadLetterStore } from '../../../shared/quarantine/dead-letter-store.js';
import { connectRedis, type RedisClient, redisConfigFromEnv } from '../../../shared/redis/connect.js';
import type { SpendEvent } from '../../../shared/spend/events.js';
import { planDayKeys } from '../../../shared/spend/keys.js';
import { SpendLedger } from '../../../shared/spend/ledger.js';
import { readPlanDay } from '../../../shared/spend/live-counters.js';
import { type KinesisHandler, loadKinesisHandler } from '../../support/lambda.js';
import { batches, encode, lambdaContext, rng, seedBudgets, shuffle } from './support.js';

// biome-ignore lint/suspicious/noTemplateCurlyInString: the literal macro an exchange forgot to substitute
const MACRO = '${AUCTION_PRICE}';

const TZ = 'America/Los_Angeles';
let region: LocalRegion;
let handler: KinesisHandler;
let redis: RedisClient;
let repo: BudgetRepository;
let ledger: SpendLedger;

beforeAll(async () => {
  region = await startLocalRegion();
  const env = region.functionEnv('trackSpend');
  handler = await loadKinesisHandler(region, 'trackSpend');
  redis = connectRedis(redisConfigFromEnv(env));
  repo = new BudgetRepository({
    client: region.dynamodb,
    tableName: region.tableName('budgets'),
    pacerShards: region.description.settings.pacer.shards,
  });
  ledger = new SpendLedger({
    client: region.dynamodb,
    tableName: region.tableName('spendLedger'),
    region: region.region,
  });
  await seedBudgets(repo, {
    accountId: 'acc1',
    timeZone: TZ,
    accountBudgetMicros: 50_000_000_000,
    campaigns: [
      { campaignId: 'c1', budgetMicros: 10_000_000_000, arms: { A: 5_000_000_000, B: 5_000_000_000 } },
      { campaignId: 'c2', budgetMicros: 10_000_000_000 },
    ],
  });
});

afterAll(async () => {
  redis?.disconnect();
  await region?.stop();
});

describe('track-spend exactly-once', () => {
  it('replaying the event log twice, with duplicated and reordered notices, equals a brute-force sum', async () => {
    const random = rng(42);
    const now = Date.now();
    const events: SpendEvent[] = [];
    const wins: { campaignId: string; armId?: string; bidAt: number; clearing: number; bidPrice: number }[] =
      [];
    const released = new Map<string, number>(); // campaign/day → Σ bid prices released by notices
    for (let i = 0; i < 300; i++) {
      const campaignId = random() < 0.7 ? 'c1' : 'c2';
      const armId = campaignId === 'c1' ? (random() < 0.5 ? 'A' : 'B') : undefined;
      const bidAt = now - Math.floor(random() * 4 * 60_000);
      const bidPriceMicros = 500 + Math.floor(random() * 5000);
      const base = {
        v: 1 as const,
        bidId: `b${i}`,
        campaignId,
        ...(armId ? { armId } : {}),
        bidAt,
        bidPriceMicros,
      };
      events.push({ type: 'bid', ...base });
      const roll = random();
      const day = dayWindow(bidAt, TZ).day;
      if (roll < 0.7) {
        const clearing = Math.floor(bidPriceMicros * (0.3 + 0.7 * random()));
        wins.push({ campaignId, ...(armId ? { armId } : {}), bidAt, clearing, bidPrice: bidPriceMicros });
        const copies = 1 + Math.floor(random() * 3);
        for (let k = 0; k < copies; k++) {
          events.push({ type: 'win', ...base, at: bidAt + 1000 + k * 500, clearingPriceMicros: clearing });
        }
        released.set(`${campaignId}/${day}`, (released.get(`${campaignId}/${day}`) ?? 0) + bidPriceMicros);
      } else if (roll < 0.9) {
        events.push({ type: 'loss', ...base, at: bidAt + 2000 });
        released.set(`${campaignId}/${day}`, (released.get(`${campaignId}/${day}`) ?? 0) + bidPriceMicros);
      }
    }
    // The OpenRTB ${AUCTION_PRICE} convention: CPM 2.5 → 2500 micros per impression.
    const macroWin = {
      v: 1,
      type: 'win',
      bidId: 'macro-1',
      campaignId: 'c2',
      bidAt: now - 1000,
      bidPriceMicros: 3000,
      at: now,
      auctionPrice: '2.5',
    };
    wins.push({ campaignId: 'c2', bidAt: now - 1000, clearing: 2500, bidPrice: 3000 });
    const macroDay = dayWindow(now - 1000, TZ).day;
    released.set(`c2/${macroDay}`, (released.get(`c2/${macroDay}`) ?? 0) + 3000);
    const poison = [
      Buffer.from('not json'),
      Buffer.from(
        JSON.stringify({
          v: 1,
          type: 'win',
          bidId: 'x1',
          campaignId: 'nope',
          bidAt: now,
          bidPriceMicros: 10,
          at: now,
          clearingPriceMicros: 5,
        }),
      ),
      Buffer.from(
        JSON.stringify({
          v: 1,
          type: 'win',
          bidId: 'x2',
          campaignId: 'c1',
          bidAt: now,
          bidPriceMicros: 10,
          at: now,
          clearingPriceMicros: -5,
        }),
      ),
      Buffer.from(
        JSON.stringify({
          v: 1,
          type: 'win',
          bidId: 'x3',
          campaignId: 'c1',
          bidAt: now,
          bidPriceMicros: 10,
          at: now,
          auctionPrice: MACRO,
        }),
      ),
      Buffer.from(
        JSON.stringify({
          v: 1,
          type: 'win',
          bidId: 'x4',
          campaignId: 'c1',
          bidAt: now,
          bidPriceMicros: 10,
          at: now,
          clearingPriceMicros: 50,
        }),
      ),
    ];
    const log = [...encode(events), Buffer.from(JSON.stringify(macroWin)), ...poison];
    // Build the Kinesis records once: the second pass is a redelivery of the same records.
    const records = batches(shuffle(log, random), 1).map((b) => b.Records[0]!);
    for (let pass = 0; pass < 2; pass++) {
      const order = shuffle(records, random);
      for (let i = 0; i < order.length; i += 40) {
        const out = await handler({ Records: order.slice(i, i + 40) }, lambdaContext);
        expect(out.batchItemFailures).toEqual([]);
      }
    }

    // Brute force.
    const sum = (pred: (w: (typeof wins)[number]) => boolean) =>
      wins.filter(pred).reduce((a, w) => a + w.clearing, 0);
    const days = [...new Set(wins.map((w) => dayWindow(w.bidAt, TZ).day))];
    const budgets = (await repo.getCampaignBudgets('c1'))!;
    const accountPlan = budgets.common.find((p) => p.level === 'account')!;
    const c1Plan = budgets.common.find((p) => p.level === 'campaign')!;
    const c2Plan = (await repo.getCampaignBudgets('c2'))!.common.find((p) => p.level === 'campaign')!;
    const armPlan = (arm: string) => budgets.arms.get(arm)!;
    expect(resolvePlan(accountPlan, TZ).scope).toBe('a:acc1');
    const nowRead = Date.now();
    for (const day of days) {
      const inDay = (w: (typeof wins)[number]) => dayWindow(w.bidAt, TZ).day === day;
      const expected = {
        account: sum(inDay),
        c1: sum((w) => inDay(w) && w.campaignId === 'c1'),
        c2: sum((w) => inDay(w) && w.campaignId === 'c2'),
        A: sum((w) => inDay(w) && w.armId === 'A'),
        B: sum((w) => inDay(w) && w.armId === 'B'),
      };
      expect(expected.c1).toBeGreaterThan(0);
      // Ledger: one item per distinct win, same amounts.
      const l1 = await ledger.entries('c1', day);
      const l2 = await ledger.entries('c2', day);
      expect(l1.length + l2.length).toBe(wins.filter(inDay).length);
      expect(l1.reduce((a, e) => a + e.clearingPriceMicros, 0)).toBe(expected.c1);
      expect(l2.reduce((a, e) => a + e.clearingPriceMicros, 0)).toBe(expected.c2);
      // Live counters of every plan.
      const read = async (plan: typeof c1Plan) => readPlanDay(redis, planDayKeys(plan, day).state, nowRead);
      expect((await read(accountPlan)).confirmedMicros).toBe(expected.account);
      expect((await read(c1Plan)).confirmedMicros).toBe(expected.c1);
      expect((await read(c2Plan)).confirmedMicros).toBe(expected.c2);
      expect((await read(armPlan('A'))).confirmedMicros).toBe(expected.A);
      expect((await read(armPlan('B'))).confirmedMicros).toBe(expected.B);
      // In-flight released exactly once per bid with a notice (no guard leased here, so the
      // in-flight sum is exactly minus the released bid prices).
      const raw = await redis.hgetall(planDayKeys(c1Plan, day).state);
      const inFlight = Object.entries(raw)
        .filter(([f]) => f.startsWith('f:'))
        .reduce((a, [, v]) => a + Number(v), 0);
      expect(inFlight).toBe(-(released.get(`c1/${day}`) ?? 0));
    }
    // Poison records: quarantined once each, with their reason.
    const dead = new DeadLetterStore({ client: region.dynamodb, tableName: region.tableName('deadLetters') });
    const letters = await dead.list('track-spend');
    expect(letters.map((l) => l.reasonCode).sort()).toEqual(
      [
        'spend.not-json',
        'spend.unknown-campaign',
        'spend.price-negative',
        'spend.unsubstituted-macro',
        'spend.clearing-above-bid',
      ].sort(),
    );
  });
});
