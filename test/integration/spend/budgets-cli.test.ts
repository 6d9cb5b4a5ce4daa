/**
 * The budgets CLI and repository against dynalite: accounts, campaigns and plans are created,
 * updated (versioned, optimistic) and listed; everything a bid needs comes back in one lookup;
 * bad input fails with a message naming the problem (and a non-zero exit from the real CLI
 * process); `reconcile` rebuilds live counters from the ledger.
 */
import { execFile } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../../cli/budgets.js';
import { type LocalRegion, startLocalRegion } from '../../../local/region.js';
import { BudgetValidationError } from '../../../shared/budget/model.js';
import {
  BudgetConflictError,
  BudgetNotFoundError,
  BudgetRepository,
} from '../../../shared/budget/repository.js';
import { dayWindow } from '../../../shared/budget/time-zone.js';
import { connectRedis, redisConfigFromEnv } from '../../../shared/redis/connect.js';
import { planDayKeys } from '../../../shared/spend/keys.js';
import { SpendLedger } from '../../../shared/spend/ledger.js';
import { readPlanDay } from '../../../shared/spend/live-counters.js';

let region: LocalRegion;
let env: Record<string, string>;
beforeAll(async () => {
  region = await startLocalRegion();
  env = region.functionEnv('trackSpend');
  Object.assign(process.env, env);
});
afterAll(async () => {
  await region?.stop();
});

describe('budgets CLI', () => {
  it('creates, updates and lists accounts, campaigns and plans', async () => {
    await main([
      'account',
      'put',
      '--id',
      'acme',
      '--name',
      'Acme',
      '--tz',
      'Pacific/Auckland',
      '--mode',
      'create',
    ]);
    await main(['campaign', 'put', '--id', 'spring', '--account', 'acme', '--name', 'Spring sale']);
    const plan = (await main([
      'plan',
      'put',
      '--level',
      'campaign',
      '--account',
      'acme',
      '--campaign',
      'spring',
      '--daily-budget',
      '1000.50',
      '--pacing',
      'even',
    ])) as { dailyBudgetMicros: number; version: number };
    expect(plan).toMatchObject({ dailyBudgetMicros: 1_000_500_000, version: 1 });
    await main([
      'plan',
      'put',
      '--level',
      'arm',
      '--account',
      'acme',
      '--campaign',
      'spring',
      '--arm',
      'B',
      '--daily-budget-micros',
      '250000000',
    ]);
    await main([
      'plan',
      'put',
      '--level',
      'account',
      '--account',
      'acme',
      '--daily-budget',
      '5000',
      '--pacing',
      'asap',
    ]);
    // Mid-day change: a new version of the plan; spend is not stored here, so nothing else moves.
    const updated = (await main([
      'plan',
      'put',
      '--level',
      'campaign',
      '--account',
      'acme',
      '--campaign',
      'spring',
      '--daily-budget',
      '1500',
      '--mode',
      'update',
    ])) as { dailyBudgetMicros: number; version: number };
    expect(updated).toMatchObject({ dailyBudgetMicros: 1_500_000_000, version: 2 });
    expect(await main(['account', 'list'])).toEqual([
      expect.objectContaining({ accountId: 'acme', timeZone: 'Pacific/Auckland' }),
    ]);
    expect(await main(['campaign', 'list', '--account', 'acme'])).toEqual(['spring']);
    expect(
      ((await main(['plan', 'list', '--account', 'acme', '--campaign', 'spring'])) as unknown[]).length,
    ).toBe(3);
    // Without --campaign: the account's plan and the plans of all its campaigns.
    const all = (await main(['plan', 'list', '--account', 'acme'])) as { level: string }[];
    expect(all.map((p) => p.level).sort()).toEqual(['account', 'arm', 'campaign']);

    const repo = new BudgetRepository({
      client: region.dynamodb,
      tableName: region.tableName('budgets'),
      pacerShards: region.description.settings.pacer.shards,
    });
    const b = (await repo.getCampaignBudgets('spring'))!;
    expect(b.account.timeZone).toBe('Pacific/Auckland');
    expect(b.common.map((p) => [p.planId, p.dailyBudgetMicros])).toEqual([
      ['account', 5_000_000_000],
      ['campaign', 1_500_000_000],
    ]);
    expect(b.arms.get('B')?.dailyBudgetMicros).toBe(250_000_000);
    expect(await repo.getCampaignBudgets('nope')).toBeUndefined();
  });

  it('rejects bad input with clear errors', async () => {
    await expect(main(['account', 'put', '--id', 'x', '--name', 'X', '--tz', 'Mars/Base'])).rejects.toThrow(
      BudgetValidationError,
    );
    await expect(main(['account', 'put', '--id', 'x', '--name', 'X', '--tz', 'Mars/Base'])).rejects.toThrow(
      /timeZone.*IANA/,
    );
    await expect(
      main(['campaign', 'put', '--id', 'c9', '--account', 'ghost', '--name', 'C']),
    ).rejects.toThrow(BudgetNotFoundError);
    await expect(
      main(['account', 'put', '--id', 'acme', '--name', 'Again', '--tz', 'UTC', '--mode', 'create']),
    ).rejects.toThrow(BudgetConflictError);
    await expect(
      main([
        'plan',
        'put',
        '--level',
        'campaign',
        '--account',
        'acme',
        '--campaign',
        'spring',
        '--daily-budget',
        '1.2345678',
      ]),
    ).rejects.toThrow(/--daily-budget/);
    await expect(
      main(['plan', 'put', '--level', 'campaign', '--account', 'acme', '--campaign', 'spring']),
    ).rejects.toThrow(/exactly one of --daily-budget/);
    // The real process (asynchronously: dynalite runs in this process): message on stderr, exit 2.
    const out = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const child = execFile(
        process.execPath,
        [
          '--import',
          'tsx',
          'cli/budgets.ts',
          'campaign',
          'put',
          '--id',
          'c9',
          '--account',
          'ghost',
          '--name',
          'C',
        ],
        { env: { ...process.env, ...env }, encoding: 'utf8' },
        (_error, _stdout, stderr) => resolve({ code: child.exitCode, stderr }),
      );
    });
    expect(out.code).toBe(2);
    expect(out.stderr).toMatch(/Account ghost does not exist: create it first/);
  });

  it('reconcile rebuilds live counters from the ledger', async () => {
    const ledger = new SpendLedger({ client: region.dynamodb, tableName: region.tableName('spendLedger') });
    const now = Date.now();
    const day = dayWindow(now, 'Pacific/Auckland').day;
    for (const [bidId, price, armId] of [
      ['r1', 700, 'B'],
      ['r2', 900, undefined],
    ] as const) {
      await ledger.record({
        campaignId: 'spring',
        accountId: 'acme',
        ...(armId ? { armId } : {}),
        bidId,
        day,
        clearingPriceMicros: price,
        bidPriceMicros: 1000,
        bidAt: now,
        noticeAt: now,
        late: false,
      });
    }
    const result = (await main(['reconcile', '--campaign', 'spring', '--day', day])) as {
      plan: string;
      confirmedMicros: number;
    }[];
    expect(result.map((r) => [r.plan, r.confirmedMicros])).toEqual([
      ['account', 1600],
      ['campaign', 1600],
      ['arm:B', 700],
    ]);
    const redis = connectRedis(redisConfigFromEnv(env));
    const repo = new BudgetRepository({
      client: region.dynamodb,
      tableName: region.tableName('budgets'),
      pacerShards: region.description.settings.pacer.shards,
    });
    const arm = (await repo.getCampaignBudgets('spring'))!.arms.get('B')!;
    expect((await readPlanDay(redis, planDayKeys(arm, day).state, now)).confirmedMicros).toBe(700);
    redis.disconnect();
  });
});
