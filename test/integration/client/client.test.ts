/**
 * `createPacelineClient` against a local region (real Redis, dynalite, kinesalite): the guard is
 * ready before the first decision (warm-up), budget changes and pauses are picked up by the
 * refresh, an untracked campaign is tracked on first sight, metrics hooks count what happened,
 * a paused Redis (SIGSTOP) never blocks or throws on the request path, and `close()` hands every
 * unused float back.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalRegion, startLocalRegion } from '../../../local/region.js';
import {
  configFromEnv,
  createPacelineClient,
  type DecisionRecord,
  type PacelineClient,
} from '../../../packages/client/src/index.js';
import { BudgetRepository } from '../../../shared/budget/repository.js';
import { dayWindow } from '../../../shared/budget/time-zone.js';
import { connectRedis, type RedisClient, redisConfigFromEnv } from '../../../shared/redis/connect.js';
import { RawReadTimeoutError } from '../../../shared/redis/resp/errors.js';
import { planDayKeys } from '../../../shared/spend/keys.js';
import { readPlanDay } from '../../../shared/spend/live-counters.js';

const TZ = 'America/New_York';
let region: LocalRegion;
let redis: RedisClient;
let repo: BudgetRepository;

beforeAll(async () => {
  region = await startLocalRegion();
  redis = connectRedis(redisConfigFromEnv(region.clientEnv));
  repo = new BudgetRepository({
    client: region.dynamodb,
    tableName: region.tableName('budgets'),
    pacerShards: region.description.settings.pacer.shards,
  });
  await repo.putAccount({ accountId: 'cl-acct', name: 'Client test', timeZone: TZ, currency: 'USD' });
  for (const campaignId of ['cl-warm', 'cl-pause', 'cl-late']) {
    await repo.putCampaign({ campaignId, accountId: 'cl-acct', name: campaignId, status: 'active' });
    await repo.putPlan({
      level: 'campaign',
      accountId: 'cl-acct',
      campaignId,
      dailyBudgetMicros: 1_000_000_000,
      pacingMode: 'even',
    });
  }
}, 60_000);
afterAll(async () => {
  redis?.disconnect();
  await region?.stop();
});

async function until(check: () => boolean, ms = 20_000): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (!check() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  return check();
}

describe('createPacelineClient', () => {
  let client: PacelineClient;
  const decisions: DecisionRecord[] = [];
  const errors: unknown[] = [];
  let n = 0;
  const bid = (campaignId: string) => client.bid({ bidId: `cl-${n++}`, campaignId, basePriceMicros: 2_000 });

  beforeAll(async () => {
    client = await createPacelineClient(
      configFromEnv(region.clientEnv, {
        campaigns: ['cl-warm', 'cl-pause'],
        budgetRefreshMs: 200,
        noticeBaseUrl: 'https://ads.example.com/notice',
        metrics: { onDecision: (d) => decisions.push(d) },
        onError: (e) => errors.push(e),
      }),
    );
  }, 60_000);

  it('is ready: the first decision for a tracked campaign bids (floats leased at start)', () => {
    expect(client.guard.stats.leaseCalls).toBeGreaterThan(0);
    const first = bid('cl-warm');
    expect(first).toMatchObject({ bid: true, priceMicros: 2_000 });
    if (!first.bid) return;
    expect(first.notices?.nurl).toContain(`t=${first.bidAt}&p=2000&price=\${AUCTION_PRICE}`);
    expect(decisions.at(-1)).toMatchObject({ campaignId: 'cl-warm', outcome: 'bid' });
  });

  it('picks up a pause and a resume from the budgets table', async () => {
    expect(bid('cl-pause').bid).toBe(true);
    await repo.putCampaign({ campaignId: 'cl-pause', accountId: 'cl-acct', name: 'p', status: 'paused' });
    expect(
      await until(
        () =>
          client.bid({ bidId: `cl-${n++}`, campaignId: 'cl-pause', basePriceMicros: 2_000 }).bid === false,
      ),
    ).toBe(true);
    expect(decisions.at(-1)?.outcome).toBe('paused');
    await repo.putCampaign({ campaignId: 'cl-pause', accountId: 'cl-acct', name: 'p', status: 'active' });
    // Resumed campaigns are warmed up again: the first answer after the refresh is a bid.
    // Ask until the answer is no longer `paused`; that first other answer must be a bid.
    const stillPaused = () => {
      const o = bid('cl-pause');
      return !o.bid && o.reason === 'paused';
    };
    expect(await until(() => !stillPaused())).toBe(true);
    expect(decisions.at(-1)?.outcome).toBe('bid');
    expect(decisions.filter((d) => d.campaignId === 'cl-pause' && d.outcome === 'no-budget')).toEqual([]);
  });

  it('tracks an untracked campaign on first sight', async () => {
    expect(bid('cl-late')).toEqual({ bid: false, reason: 'unknown-campaign', pacing: 'missing' });
    expect(await until(() => bid('cl-late').bid)).toBe(true);
    const m = client.metrics();
    expect(m.decisions['unknown-campaign']).toBeGreaterThanOrEqual(1);
    expect(m.decisions.total).toBe(decisions.length);
    expect(m.decisions.bid).toBe(decisions.filter((d) => d.outcome === 'bid').length);
  });

  it('counts caps without their identity in its metrics (the policy of the store: refuse)', async () => {
    const before = client.metrics().capsWithoutIdentity;
    const result = await client.checkFrequencyCaps({
      identities: {},
      candidates: [
        {
          id: 'no-id',
          entities: { ad: 1, adGroup: 1, campaign: 1, advertiser: 1 },
          caps: [
            { level: 'ad', windowMs: 3_600_000, max: 3 },
            { level: 'campaign', windowMs: 86_400_000, max: 9, key: 'household' },
          ],
        },
      ],
    });
    expect(result.rejected.map((v) => v.id)).toEqual(['no-id']);
    expect(client.metrics().capsWithoutIdentity).toEqual({ ...before, refused: before.refused + 2 });
  });

  it('never blocks or throws on the request path while Redis is paused (SIGSTOP)', async () => {
    const pid = region.redis.pids[0] as number;
    process.kill(pid, 'SIGSTOP');
    try {
      const outcomes = Array.from({ length: 3_000 }, () => bid('cl-warm'));
      // Local floats only: some bids while the float lasts, then no-budget — never a throw.
      const reasons = new Set(outcomes.map((o) => (o.bid ? 'bid' : o.reason)));
      expect([...reasons].every((r) => r === 'bid' || r === 'no-budget')).toBe(true);
      expect(reasons.has('no-budget')).toBe(true);
      expect(client.metrics().noBudgetShare).toBeGreaterThan(0);
      // A cap check does not hang on the paused node: it rejects after the read timeout (1 s).
      const t0 = performance.now();
      await expect(
        client.checkFrequencyCaps({
          userId: '42',
          candidates: [
            {
              id: 'c',
              entities: { ad: 1, adGroup: 1, campaign: 1, advertiser: 1 },
              caps: [{ level: 'ad', windowMs: 3_600_000, max: 3 }],
            },
          ],
        }),
      ).rejects.toThrow(RawReadTimeoutError);
      expect(performance.now() - t0).toBeLessThan(5_000);
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    expect(await until(() => bid('cl-warm').bid)).toBe(true);
  });

  it('close() returns every unused float (nothing left leased in Redis)', async () => {
    await client.close();
    const budgets = await repo.getCampaignBudgets('cl-warm');
    const plan = budgets?.common[0];
    const day = dayWindow(Date.now(), TZ).day;
    const live = await readPlanDay(
      redis,
      planDayKeys(plan as NonNullable<typeof plan>, day).state,
      Date.now(),
    );
    expect(live.leasedMicros).toBe(0);
    expect(live.inFlightMicros).toBeGreaterThan(0); // bids stay in flight until notices or T
    await client.close(); // idempotent
  });
});
