/**
 * `paceline budgets rehome` on real local regions while a $5 campaign is spent at full speed
 * (test/integration/regions/full-speed.ts): bad inputs are refused with one line and the usage /
 * not-found / conflict exit codes, nothing written; a good rehome moves the authority (fence + 1);
 * the new home grants nothing before the settle time; the old home, once its replica shows the
 * new fence, allocates nothing for the plan; an authority entry of the old fence (a stale home
 * still writing) moves no region's cap; combined spend stays ≤ B + max(0.5 %, one bid).
 */
import { DynamoDBDocumentClient, PutCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, describe, expect, it } from 'vitest';
import { main as paceline } from '../../../cli/paceline.js';
import { rehomePlan } from '../../../shared/budget/allocation-home.js';
import { BudgetConflictError } from '../../../shared/budget/repository.js';
import { dayWindow } from '../../../shared/budget/time-zone.js';
import { pacerShardKey } from '../../../shared/pacing/shard.js';
import {
  CAMPAIGN,
  campaignStateKey,
  type FullSpeedContext,
  type FullSpeedResult,
  fullSpeedRun,
  stopRun,
  T0,
  TICK,
} from './full-speed.js';
import { REGION_A, REGION_B } from './support.js';

const BUDGET = 5_000_000;
const PRICE = 10_000;
const BOUND = BUDGET + Math.max(0.005 * BUDGET, PRICE);
const PLAN = `c:${CAMPAIGN}:campaign`;

let run: FullSpeedResult | undefined;
afterAll(async () => stopRun(run));

async function cli(ctx: FullSpeedContext, region: string, args: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const env = (ctx.two.regions[region] as NonNullable<FullSpeedContext['two']['regions'][string]>).clientEnv;
  const code = await paceline(['budgets', 'rehome', ...args], {
    out: (l) => out.push(l),
    err: (l) => err.push(l),
    env,
    now: () => ctx.clock.now(),
    repoRoot: '/nonexistent',
  });
  return { code, out, err };
}

describe('budgets rehome', () => {
  it('refuses bad inputs, moves the authority fenced, settles, and a stale fence allocates nothing', async () => {
    const checks: Record<string, unknown> = {};
    let settleUntil = 0;
    let rehomedAtTick = -1;
    const key = `c:${CAMPAIGN}:campaign|${dayWindow(T0, 'America/New_York').day}`;
    const caps: { tick: number; capB?: string | null; agB?: string | null }[] = [];
    run = await fullSpeedRun({
      names: [REGION_A, REGION_B],
      mode: 'strict',
      budgetMicros: BUDGET,
      priceMicros: PRICE,
      bidsPerSecond: { [REGION_A]: 1, [REGION_B]: 2 },
      ticks: 20,
      onTick: async (i, ctx) => {
        const redisB = ctx.two.redis[REGION_B];
        if (process.env.DEBUG_REHOME) {
          for (const r of [REGION_A, REGION_B]) {
            const f = await ctx.two.redis[r]?.hmget(campaignStateKey(), 'a', 'ag', 'ar', 'ax', 'ae', 'c');
            console.log(`tick ${i} ${r} a/ag/ar/ax/ae/c ${JSON.stringify(f)}`);
          }
          for (const o of ctx.authority.filter((x) => x.tick === i - 1))
            console.log(`tick ${i - 1} authority ${o.region} ${JSON.stringify(o.outcome)}`);
        }
        caps.push({
          tick: i,
          capB: await redisB?.hget(campaignStateKey(), 'a'),
          agB: await redisB?.hget(campaignStateKey(), 'ag'),
        });
        if (i === 3) {
          const bad = {
            planForm: await cli(ctx, REGION_B, ['--plan', CAMPAIGN, '--region', REGION_B]),
            notARegion: await cli(ctx, REGION_B, ['--plan', PLAN, '--region', 'mars-1']),
            notDeployed: await cli(ctx, REGION_B, ['--plan', PLAN, '--region', 'eu-west-1']),
            alreadyHome: await cli(ctx, REGION_B, ['--plan', PLAN, '--region', REGION_A]),
            noPlan: await cli(ctx, REGION_B, ['--plan', 'c:nope:campaign', '--region', REGION_A]),
          };
          checks.bad = Object.fromEntries(Object.entries(bad).map(([k, v]) => [k, [v.code, v.err.at(-1)]]));
          const good = await cli(ctx, REGION_B, ['--plan', PLAN, '--region', REGION_B, '--json']);
          checks.good = [good.code, good.err.at(-1)];
          const result = JSON.parse(good.out[0] ?? '{}') as {
            settleUntil: number;
            fence: number;
            home: string;
          };
          checks.result = result;
          settleUntil = result.settleUntil;
          rehomedAtTick = i;
          const again = await cli(ctx, REGION_B, ['--plan', PLAN, '--region', REGION_A]);
          checks.again = [again.code, again.err.at(-1)];
          // a rehome written from a stale read of the fence loses
          const b = ctx.two.regions[REGION_B] as NonNullable<FullSpeedContext['two']['regions'][string]>;
          try {
            const repoTable = { client: b.dynamodb, tableName: b.tableName('budgets') };
            const campaign = await ctx.regions.get(REGION_B)?.spend.budgets.getCampaign(CAMPAIGN);
            await rehomePlan(
              repoTable,
              { level: 'campaign', accountId: campaign?.accountId as string, campaignId: CAMPAIGN },
              REGION_A,
              0,
              ctx.clock.now() + 30_000,
              ctx.clock.now(),
            );
            checks.race = 'written';
          } catch (error) {
            checks.race = error instanceof BudgetConflictError ? `conflict: ${error.message}` : String(error);
          }
        }
        if (i === 12) {
          // A stale home (fence 0) still writing: a huge grant to B in B's replica, newest tick.
          const b = ctx.two.regions[REGION_B] as NonNullable<FullSpeedContext['two']['regions'][string]>;
          const shards = b.description.settings.pacer.shards;
          await DynamoDBDocumentClient.from(b.dynamodb).send(
            new PutCommand({
              TableName: b.tableName('regionSpend'),
              Item: {
                pk: pacerShardKey(1, shards),
                sk: `alloc#${REGION_A}`,
                regions: [REGION_A, REGION_B],
                plans: JSON.stringify({
                  [key]: [
                    0,
                    [BUDGET, 100 * BUDGET],
                    [0, 0],
                    [0, 0],
                    [T0 + 3_600_000, T0 + 3_600_000],
                    [0, 0],
                  ],
                }),
                tick: Number.MAX_SAFE_INTEGER,
                atMs: ctx.clock.now(),
                epoch: Number.MAX_SAFE_INTEGER,
                writer: 'stale',
                parts: 1,
              },
            }),
          );
        }
      },
    });
    console.log(JSON.stringify({ checks, combined: run.combined, perRegion: run.confirmed }));
    const bad = checks.bad as Record<string, [number, string]>;
    expect(bad.planForm?.[0]).toBe(2);
    expect(bad.planForm?.[1]).toMatch(/--plan "fast-c": give the plan as spend status shows it/);
    expect(bad.notARegion).toEqual([2, expect.stringMatching(/--region "mars-1" is not a region name/)]);
    expect(bad.notDeployed).toEqual([
      2,
      expect.stringMatching(/eu-west-1 is not a region of this deployment \(us-east-1, us-west-2\)/),
    ]);
    expect(bad.alreadyHome).toEqual([
      2,
      expect.stringMatching(/us-east-1 is already the home of c:fast-c:campaign/),
    ]);
    expect(bad.noPlan).toEqual([3, expect.stringMatching(/Campaign nope does not exist/)]);
    expect((checks.good as [number])[0]).toBe(0);
    expect(checks.result).toMatchObject({ plan: PLAN, previousHome: REGION_A, home: REGION_B, fence: 1 });
    expect(checks.again).toEqual([2, expect.stringMatching(/settles until/)]);
    expect(checks.race).toMatch(/^conflict: plan campaign was rehomed concurrently/);
    const byTick = (region: string) =>
      new Map(run?.context.authority.filter((a) => a.region === region).map((a) => [a.tick, a.outcome]));
    const a = byTick(REGION_A);
    const b = byTick(REGION_B);
    // Before: A is home. After its replica shows fence 1 (the next tick), A allocates nothing.
    expect(a.get(rehomedAtTick - 1)?.plans).toBe(1);
    for (let t = rehomedAtTick + 1; t < 20; t++) expect(a.get(t)?.plans, `A at tick ${t}`).toBe(0);
    for (let t = rehomedAtTick + 1; t < 20; t++) expect(b.get(t)?.plans, `B at tick ${t}`).toBe(1);
    // B grants nothing before the settle time, then does.
    const tickAt = (t: number) => T0 + t * TICK;
    for (const [t, o] of b) if (tickAt(t) < settleUntil) expect(o.grantedMicros, `B at tick ${t}`).toBe(0);
    expect([...b].filter(([t, o]) => tickAt(t) >= settleUntil && o.grantedMicros > 0).length).toBeGreaterThan(
      0,
    );
    // The stale entry (tick 12) raised nothing: B's cap and applied grant never approach it.
    for (const c of caps)
      expect(Number(c.agB ?? 0), `B's applied grant at tick ${c.tick}`).toBeLessThanOrEqual(BUDGET);
    expect(run.combined).toBeLessThanOrEqual(BOUND);
  }, 600_000);
});
