/**
 * The budgets CLI and repository against dynalite: accounts, campaigns and plans are created,
 * updated (versioned, optimistic) and listed; everything a bid needs comes back in one lookup;
 * bad input fails with a message naming the problem (and a non-zero exit from the real CLI
 * process); `reconcile` rebuilds live counters from the ledger.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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
  // track-spend's settings (in-flight lifetime, Redis), run as the operator: the CLI writes
  // budgets, which no function's policy allows.
  env = {
    ...region.functionEnv('trackSpend'),
    AWS_ACCESS_KEY_ID: region.clientEnv.AWS_ACCESS_KEY_ID as string,
    AWS_SECRET_ACCESS_KEY: region.clientEnv.AWS_SECRET_ACCESS_KEY as string,
  };
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
    expect(out.code).toBe(3);
    expect(out.stderr).toMatch(/Account ghost does not exist: create it first/);
  });

  it('reconcile rebuilds live counters from the ledger', async () => {
    const ledger = new SpendLedger({
      client: region.dynamodb,
      tableName: region.tableName('spendLedger'),
      region: region.region,
    });
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

    // Again: already initialised, so nothing is rebuilt — and the output says what is there.
    const again = (await main(['reconcile', '--campaign', 'spring', '--day', day])) as Record<
      string,
      unknown
    >[];
    expect(again.find((r) => r.plan === 'campaign')).toMatchObject({
      installed: false,
      outcome: expect.stringMatching(/already initialised/),
      confirmedMicros: 1600,
      ledgerWins: 2,
      ledgerConfirmedMicros: 1600,
    });
    expect(again.find((r) => r.plan === 'campaign')).not.toHaveProperty('note');
    // A win in the ledger that the live counters do not hold (yet): the difference is reported.
    await ledger.record({
      campaignId: 'spring',
      accountId: 'acme',
      bidId: 'r3',
      day,
      clearingPriceMicros: 500,
      bidPriceMicros: 1000,
      bidAt: now,
      noticeAt: now,
      late: false,
    });
    const drift = (await main(['reconcile', '--campaign', 'spring', '--day', day])) as Record<
      string,
      unknown
    >[];
    expect(drift.find((r) => r.plan === 'account')).toMatchObject({
      confirmedMicros: 1600,
      ledgerWins: 3,
      ledgerConfirmedMicros: 2100,
      note: expect.stringMatching(/differs from the ledger/),
    });
    redis.disconnect();
  });
});

/** Runs the real CLI process; resolves with its exit code and output. */
function cli(args: string[], childEnv: Record<string, string | undefined>) {
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = execFile(
      process.execPath,
      ['--import', 'tsx', 'cli/budgets.ts', ...args],
      { env: childEnv as NodeJS.ProcessEnv, encoding: 'utf8' },
      (_error, stdout, stderr) => resolve({ code: child.exitCode, stdout, stderr }),
    );
  });
}

/** The acme account's plans as listed: a refused write must leave them as they were. */
const acmePlans = async () => JSON.stringify(await main(['plan', 'list', '--account', 'acme']));

/** Runs the CLI with `args`, expects it refused with `message`, and the acme plans unchanged. */
async function expectRefusedUnwritten(args: string[], message: RegExp): Promise<void> {
  const before = await acmePlans();
  await expect(main(args)).rejects.toThrow(message);
  expect(await acmePlans()).toBe(before);
}

describe('budgets CLI strict input: each case is an error and writes nothing', () => {
  const planArgs = ['plan', 'put', '--level', 'campaign', '--account', 'acme', '--campaign', 'spring'];

  it.each([
    ['--daily-budget-micros', ''],
    ['--daily-budget-micros', '0x10'],
    ['--daily-budget-micros', '1e6'],
    ['--daily-budget-micros', ' 7 '],
    ['--daily-budget-micros', '12.5'],
    ['--daily-budget', ''],
    ['--daily-budget', '0x10'],
    ['--daily-budget', '1e6'],
    ['--daily-budget', ' 7 '],
    ['--daily-budget', '007'],
    ['--daily-budget', '+7'],
  ])('rejects %s %j', async (flag, value) => {
    await expectRefusedUnwritten(
      [...planArgs, flag, value],
      new RegExp(`${flag} ${JSON.stringify(value).replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`),
    );
  });

  it('rejects ids that do not belong to the plan level', async () => {
    const before = await acmePlans();
    await expect(
      main([
        'plan',
        'put',
        '--level',
        'account',
        '--account',
        'acme',
        '--campaign',
        'spring',
        '--daily-budget',
        '1',
      ]),
    ).rejects.toThrow(/--level account takes no --campaign/);
    await expect(main([...planArgs, '--arm', 'B', '--daily-budget', '1'])).rejects.toThrow(/takes no --arm/);
    await expect(
      main([
        'plan',
        'put',
        '--level',
        'arm',
        '--account',
        'acme',
        '--campaign',
        'spring',
        '--daily-budget',
        '1',
      ]),
    ).rejects.toThrow(/--arm is required/);
    await expect(
      main(['plan', 'put', '--level', 'line', '--account', 'acme', '--daily-budget', '1']),
    ).rejects.toThrow(/--level "line": use account, campaign, arm/);
    await expect(main([...planArgs, '--daily-budget', '1', '--pacing', 'fast'])).rejects.toThrow(/--pacing/);
    expect(await acmePlans()).toBe(before);
  });

  it('reconciles only real calendar days that have begun', async () => {
    for (const day of ['2026-13-45', '2026-02-29', '2026-1-5', 'yesterday']) {
      await expect(main(['reconcile', '--campaign', 'spring', '--day', day])).rejects.toThrow(/--day|Day/);
    }
    const future = dayWindow(Date.now() + 3 * 86_400_000, 'Pacific/Auckland').day;
    await expect(main(['reconcile', '--campaign', 'spring', '--day', future])).rejects.toThrow(
      /has not begun/,
    );
    const redis = connectRedis(redisConfigFromEnv(env));
    expect(await redis.keys('pl:1:*2026-13-45*')).toEqual([]);
    expect(await redis.keys(`pl:1:*${future}*`)).toEqual([]);
    redis.disconnect();
  });

  it('stores time zones in their canonical spelling and refuses offsets', async () => {
    const stored = (await main([
      'account',
      'put',
      '--id',
      'tzc',
      '--name',
      'T',
      '--tz',
      'america/los_angeles',
    ])) as {
      timeZone: string;
    };
    expect(stored.timeZone).toBe('America/Los_Angeles');
    expect(
      (
        (await main(['account', 'put', '--id', 'tzc', '--name', 'T', '--tz', 'Etc/UTC'])) as {
          timeZone: string;
        }
      ).timeZone,
    ).toBe('UTC');
    for (const tz of ['+01:00', 'UTC+1', '']) {
      await expect(main(['account', 'put', '--id', 'tzd', '--name', 'T', '--tz', tz])).rejects.toThrow(
        /tz|timeZone/,
      );
    }
    expect(
      ((await main(['account', 'list'])) as { accountId: string }[]).map((a) => a.accountId),
    ).not.toContain('tzd');
  });

  it('prints one-line errors with the documented exit codes, and never reaches AWS silently', async () => {
    const usage = await cli([...planArgs, '--daily-budget-micros', ''], { ...process.env, ...env });
    expect(usage.code).toBe(2);
    // The target line, then the error on one line.
    const [targetLine, errorLine, ...rest] = usage.stderr.trim().split('\n');
    expect(targetLine).toMatch(
      /^budgets: Target: local us-east-1 \(dynamodb http:\/\/127\.0\.0\.1:\d+, table paceline-budgets\)$/,
    );
    expect(errorLine).toMatch(/^budgets: --daily-budget-micros "": give integer micros/);
    expect(rest).toEqual([]);
    // A store that cannot be reached (DynamoDB down): one line, exit 6 (the shared table in
    // cli/common.ts), no stack trace.
    const down = await cli(['account', 'list'], {
      ...process.env,
      ...env,
      AWS_ENDPOINT_URL_DYNAMODB: 'http://127.0.0.1:9',
      AWS_MAX_ATTEMPTS: '1',
    });
    expect(down.code).toBe(6);
    const lines = down.stderr
      .trim()
      .split('\n')
      .filter((l) => !l.includes('NodeVersionSupportWarning') && l.startsWith('budgets:'));
    expect(lines.length).toBeGreaterThanOrEqual(1);
    expect(down.stderr).not.toMatch(/\n\s+at /);
    // Without endpoint variables and without --aws: refused before any client is built.
    const clean = Object.fromEntries(
      Object.entries(process.env).filter(([k]) => !k.startsWith('AWS_ENDPOINT_URL')),
    );
    const refused = await cli(['account', 'list'], clean);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/pass --aws/);
    // The target comes first, on stderr.
    const ok = await cli(['account', 'list', '--json'], { ...process.env, ...env });
    expect(ok.code).toBe(0);
    expect(ok.stderr).toMatch(/^budgets: Target: local us-east-1 /m);
    expect(JSON.parse(ok.stdout)).toEqual(
      expect.arrayContaining([expect.objectContaining({ accountId: 'acme' })]),
    );
  });
});

describe('budgets CLI dayparting', () => {
  const put = [
    'plan',
    'put',
    '--level',
    'campaign',
    '--account',
    'acme',
    '--campaign',
    'office',
    '--daily-budget',
    '50',
  ];

  it('writes a dayparted plan with its windows and zone', async () => {
    await main(['campaign', 'put', '--id', 'office', '--account', 'acme', '--name', 'Office hours']);
    const plan = await main([
      ...put,
      '--daypart',
      'mon-fri 08:00-20:00; sat 10:00-14:00',
      '--daypart-zone',
      'America/Los_Angeles',
    ]);
    expect(plan).toMatchObject({
      daypart: {
        timeZone: 'America/Los_Angeles',
        windows: [
          { weekdays: [1, 2, 3, 4, 5], fromMinute: 480, toMinute: 1200 },
          { weekdays: [6], fromMinute: 600, toMinute: 840 },
        ],
      },
    });
    const listed = (await main(['plan', 'list', '--account', 'acme', '--campaign', 'office'])) as {
      level: string;
    }[];
    expect(listed.find((p) => p.level === 'campaign')).toMatchObject({
      daypart: { timeZone: 'America/Los_Angeles' },
    });
  });

  it.each([
    ['a window with no time', ['--daypart', 'mon-fri'], /--daypart: window "mon-fri" has no time/],
    ['an end before its start', ['--daypart', 'mon 20:00-08:00'], /ends before it starts: split a window/],
    [
      'a zone that does not exist',
      ['--daypart', 'mon 08:00-09:00', '--daypart-zone', 'Europe/Atlantis'],
      /--daypart-zone "Europe\/Atlantis" is not a time zone/,
    ],
    ['a zone without windows', ['--daypart-zone', 'UTC'], /give --daypart too/],
  ])('refuses %s and writes nothing', async (_what, args, message) => {
    await expectRefusedUnwritten([...put, ...(args as string[])], message as RegExp);
  });
});

describe('budgets CLI custom curves', () => {
  const put = [
    'plan',
    'put',
    '--level',
    'campaign',
    '--account',
    'acme',
    '--campaign',
    'curved',
    '--daily-budget',
    '24',
  ];
  const file = (name: string, text: string) => {
    const path = join(mkdtempSync(join(tmpdir(), 'curve-')), name);
    writeFileSync(path, text);
    return path;
  };
  const hourly: number[] = Array.from({ length: 24 }, (_, h) => (h < 12 ? 0.02 : 0.0633333333333333));
  hourly[23] = 1 - hourly.slice(0, 23).reduce((a, b) => a + b, 0);

  it('writes a curve plan from a file of one share per line', async () => {
    await main(['campaign', 'put', '--id', 'curved', '--account', 'acme', '--name', 'Curved']);
    const plan = await main([...put, '--pacing', 'curve', '--curve', file('day.txt', hourly.join('\n'))]);
    expect(plan).toMatchObject({ pacingMode: 'curve', curve: hourly });
  });

  it.each([
    [
      'a curve that does not sum to 1',
      () => ['--pacing', 'curve', '--curve', file('c.json', JSON.stringify(hourly.map((x) => x / 2)))],
      /sum to 0\.5, not 1/,
    ],
    [
      'a curve of 12 points',
      () => ['--pacing', 'curve', '--curve', file('c.json', '[0.5,0.5,0,0,0,0,0,0,0,0,0,0]')],
      /24 points .* got 12/,
    ],
    [
      'a file that is not there',
      () => ['--pacing', 'curve', '--curve', '/nonexistent/curve.json'],
      /cannot read it \(ENOENT\)/,
    ],
    [
      'curve mode without a curve',
      () => ['--pacing', 'curve'],
      /curve: curve paces to the plan's own curve and none is given/,
    ],
    [
      'a curve with another mode',
      () => ['--curve', file('c.json', JSON.stringify(hourly))],
      /a curve is for --pacing curve/,
    ],
  ])('refuses %s and writes nothing', async (_what, args, message) => {
    await expectRefusedUnwritten([...put, ...(args as () => string[])()], message as RegExp);
  });
});

describe('budgets CLI flights: a lifetime budget with a daily cap', () => {
  const xmas = ['plan', 'put', '--level', 'campaign', '--account', 'acme', '--campaign', 'xmas'];
  const flight = ['--flight-start', '2026-12-01', '--flight-end', '2026-12-21', '--flight-budget', '30000'];

  it('writes a flight plan whose amount is its daily cap', async () => {
    await main(['campaign', 'put', '--id', 'xmas', '--account', 'acme', '--name', 'Christmas']);
    const plan = await main([...xmas, ...flight, '--daily-cap', '2000', '--pacing', 'ahead']);
    expect(plan).toMatchObject({
      dailyBudgetMicros: 2_000_000_000,
      pacingMode: 'ahead',
      flight: { startDay: '2026-12-01', endDay: '2026-12-21', budgetMicros: 30_000_000_000 },
    });
    // The account's plan and the campaign's flight plan.
    const listed = (await main(['plan', 'list', '--account', 'acme', '--campaign', 'xmas'])) as {
      level: string;
    }[];
    expect(listed.find((p) => p.level === 'campaign')).toMatchObject({
      flight: { endDay: '2026-12-21', budgetMicros: 30_000_000_000 },
    });
  });

  it('writes a front-loaded flight', async () => {
    const plan = await main([...xmas, ...flight, '--daily-cap', '2500', '--pacing', 'front-loaded']);
    expect(plan).toMatchObject({ pacingMode: 'front-loaded', dailyBudgetMicros: 2_500_000_000 });
  });

  it.each([
    [
      'an end before the start',
      [...flight.slice(0, 2), '--flight-end', '2026-11-30', ...flight.slice(4), '--daily-cap', '2000'],
      /flight\.endDay: 2026-11-30 is before the start 2026-12-01/,
    ],
    [
      'a cap above the flight',
      [...flight, '--daily-cap', '40000'],
      /daily cap 40000000000 is above the flight budget/,
    ],
    [
      'a cap the flight could never spend',
      [...flight, '--daily-cap', '1000'],
      /below the flight budget .* raise the cap/,
    ],
    [
      'a day that does not exist',
      [...flight.slice(0, 2), '--flight-end', '2026-02-30', ...flight.slice(4), '--daily-cap', '2000'],
      /flight\.endDay: .*not a calendar date/,
    ],
    [
      'a flight without its budget',
      [...flight.slice(0, 4), '--daily-cap', '2000'],
      /exactly one of --flight-budget/,
    ],
    [
      'a flight without its end',
      ['--flight-start', '2026-12-01', '--flight-budget', '30000', '--daily-cap', '2000'],
      /--flight-end is required/,
    ],
    [
      'a flight with a daily budget',
      [...flight, '--daily-budget', '2000'],
      /daily amount is its cap: give --daily-cap/,
    ],
    ['a cap without a flight', ['--daily-cap', '2000'], /--daily-cap caps a flight/],
    [
      'front-loaded without a flight',
      ['--daily-budget', '2000', '--pacing', 'front-loaded'],
      /pacingMode: front-loaded spreads a flight over its days and this plan has no flight/,
    ],
    [
      'a flight budget in bad units',
      [...flight.slice(0, 4), '--flight-budget', '3e4', '--daily-cap', '2000'],
      /--flight-budget "3e4"/,
    ],
  ])('refuses %s and writes nothing', async (_what, args, message) => {
    await expectRefusedUnwritten([...xmas, ...(args as string[])], message as RegExp);
  });
});
