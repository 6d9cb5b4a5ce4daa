/**
 * `tsx cli/budgets.ts <command>`: create, update and list accounts, campaigns and budget plans in
 * the budgets table, and rebuild live spend counters from the ledger. Talks to the table named by
 * BUDGETS_TABLE (default `paceline-budgets`) at AWS_ENDPOINT_URL_DYNAMODB (the local region's
 * dynalite, or AWS). Prints JSON; errors say what was wrong and exit non-zero. Writes tag items
 * with their pacer shard: N comes from PACER_SHARDS, else the region's SSM parameter
 * `/paceline/<region>/pacer/shards` (docs/pacing.md).
 *
 *   account put  --id A --name N --tz America/Los_Angeles [--currency USD] [--mode create|update|upsert]
 *   account list
 *   campaign put --id C --account A --name N [--status active|paused] [--mode …]
 *   campaign list --account A
 *   plan put     --level account|campaign|arm --account A [--campaign C] [--arm X]
 *                (--daily-budget 1000.50 | --daily-budget-micros 1000500000) [--pacing even|asap] [--mode …]
 *   plan list    --account A [--campaign C]
 *   reconcile    --campaign C [--day YYYY-MM-DD] [--force]   (needs REDIS_NODES/REDIS_MODE, SPEND_LEDGER_TABLE)
 *   reshard      --shards N   (re-tags every item for N pacer shards: step 2 of the re-shard procedure, docs/pacing.md)
 */
import { parseArgs } from 'node:util';
import { dynamoDbClient, endpointsFromEnv, ssmClient } from '../shared/aws/clients.js';
import {
  BudgetValidationError,
  type PacingMode,
  type PlanLevel,
  plansForBid,
} from '../shared/budget/model.js';
import {
  BudgetConflictError,
  BudgetNotFoundError,
  BudgetRepository,
  type WriteMode,
} from '../shared/budget/repository.js';
import { dayWindow, InvalidTimeZoneError } from '../shared/budget/time-zone.js';
import { intEnv } from '../shared/config/env.js';
import { ControlParameterMissingError, resolvePacerShards } from '../shared/pacing/control.js';
import { connectRedis, redisConfigFromEnv } from '../shared/redis/connect.js';
import { regionResources, resourceName } from '../shared/region/resources.js';
import { SpendLedger } from '../shared/spend/ledger.js';
import { defaultInFlight, Reconciler } from '../shared/spend/reconcile.js';
import { systemClock } from '../shared/time/clock.js';

/** Wrong command line; the message says what to type. */
export class CliUsageError extends Error {
  override readonly name = 'CliUsageError';
}

const USAGE = `usage: budgets <account|campaign|plan> <put|list> [options] | budgets reconcile --campaign C [--day D] [--force]
  account put  --id A --name N --tz <IANA zone> [--currency USD] [--mode create|update|upsert]
  account list
  campaign put --id C --account A --name N [--status active|paused] [--mode …]
  campaign list --account A
  plan put     --level account|campaign|arm --account A [--campaign C] [--arm X]
               (--daily-budget <dollars> | --daily-budget-micros <int>) [--pacing even|asap] [--mode …]
  plan list    --account A [--campaign C]
  reconcile    --campaign C [--day YYYY-MM-DD] [--force]
  reshard      --shards N   (re-tag every item for N pacer shards; docs/pacing.md, "Changing N")`;

const options = {
  id: { type: 'string' },
  name: { type: 'string' },
  tz: { type: 'string' },
  currency: { type: 'string', default: 'USD' },
  mode: { type: 'string', default: 'upsert' },
  account: { type: 'string' },
  campaign: { type: 'string' },
  arm: { type: 'string' },
  status: { type: 'string', default: 'active' },
  level: { type: 'string' },
  'daily-budget': { type: 'string' },
  'daily-budget-micros': { type: 'string' },
  pacing: { type: 'string', default: 'even' },
  day: { type: 'string' },
  force: { type: 'boolean', default: false },
  shards: { type: 'string' },
} as const;

function need(value: string | undefined, flag: string): string {
  if (value === undefined || value === '') throw new CliUsageError(`--${flag} is required.\n${USAGE}`);
  return value;
}

function writeMode(value: string): WriteMode {
  if (value !== 'create' && value !== 'update' && value !== 'upsert') {
    throw new CliUsageError(`--mode ${value}: use create, update or upsert.`);
  }
  return value;
}

/** Dollars ("1000.50") → integer micros, exactly (no float rounding). */
export function dollarsToMicros(value: string): number {
  const m = /^(\d{1,8})(?:\.(\d{1,6}))?$/.exec(value.trim());
  if (!m)
    throw new CliUsageError(
      `--daily-budget ${value}: give dollars such as 1000 or 1000.50 (up to 6 decimals).`,
    );
  return Number(m[1]) * 1_000_000 + Number((m[2] ?? '').padEnd(6, '0'));
}

function budgetMicros(values: Record<string, unknown>): number {
  const dollars = values['daily-budget'] as string | undefined;
  const micros = values['daily-budget-micros'] as string | undefined;
  if ((dollars === undefined) === (micros === undefined)) {
    throw new CliUsageError(
      'Give exactly one of --daily-budget <dollars> or --daily-budget-micros <integer>.',
    );
  }
  if (dollars !== undefined) return dollarsToMicros(dollars);
  const n = Number(micros);
  if (!Number.isSafeInteger(n)) throw new CliUsageError(`--daily-budget-micros ${micros} is not an integer.`);
  return n;
}

/** Runs one command; returns what to print. */
export async function main(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<unknown> {
  const { values, positionals } = parseArgs({ args: argv, options, allowPositionals: true, strict: true });
  const [what, verb] = positionals;
  const endpoints = endpointsFromEnv(env);
  const dynamodb = dynamoDbClient(endpoints);
  let pacerShards: number | undefined;
  if (verb === 'put') {
    const ssm = ssmClient(endpoints);
    try {
      pacerShards = await resolvePacerShards(env, ssm, endpoints.region);
    } finally {
      ssm.destroy();
    }
  }
  const repo = new BudgetRepository({
    client: dynamodb,
    tableName: resourceName(regionResources.tables.budgets, env),
    ...(pacerShards === undefined ? {} : { pacerShards }),
  });
  try {
    const mode = writeMode(values.mode);
    if (what === 'account' && verb === 'put') {
      return await repo.putAccount(
        {
          accountId: need(values.id, 'id'),
          name: need(values.name, 'name'),
          timeZone: need(values.tz, 'tz'),
          currency: values.currency,
        },
        mode,
      );
    }
    if (what === 'account' && verb === 'list') return await repo.listAccounts();
    if (what === 'campaign' && verb === 'put') {
      return await repo.putCampaign(
        {
          campaignId: need(values.id, 'id'),
          accountId: need(values.account, 'account'),
          name: need(values.name, 'name'),
          status: values.status as 'active',
        },
        mode,
      );
    }
    if (what === 'campaign' && verb === 'list')
      return await repo.listCampaignIds(need(values.account, 'account'));
    if (what === 'plan' && verb === 'put') {
      return await repo.putPlan(
        {
          level: need(values.level, 'level') as PlanLevel,
          accountId: need(values.account, 'account'),
          ...(values.campaign ? { campaignId: values.campaign } : {}),
          ...(values.arm ? { armId: values.arm } : {}),
          dailyBudgetMicros: budgetMicros(values),
          pacingMode: values.pacing as PacingMode,
        },
        mode,
      );
    }
    if (what === 'plan' && verb === 'list')
      return await repo.listPlans(need(values.account, 'account'), values.campaign);
    if (what === 'reshard') {
      const n = Number(need(values.shards, 'shards'));
      if (!Number.isSafeInteger(n) || n < 1)
        throw new CliUsageError(`--shards ${values.shards}: give a whole number ≥ 1.`);
      return { shards: n, ...(await repo.reshard(n)) };
    }
    if (what === 'reconcile')
      return await reconcile(
        repo,
        dynamodb,
        need(values.campaign, 'campaign'),
        values.day,
        values.force,
        env,
      );
    throw new CliUsageError(`Unknown command "${positionals.join(' ')}".\n${USAGE}`);
  } finally {
    dynamodb.destroy();
  }
}

async function reconcile(
  repo: BudgetRepository,
  dynamodb: ReturnType<typeof dynamoDbClient>,
  campaignId: string,
  day: string | undefined,
  force: boolean,
  env: NodeJS.ProcessEnv,
): Promise<unknown> {
  const budgets = await repo.getCampaignBudgets(campaignId);
  if (!budgets) throw new BudgetNotFoundError(`Campaign ${campaignId} (or its account) does not exist.`);
  const redis = connectRedis(redisConfigFromEnv(env));
  try {
    const ledger = new SpendLedger({
      client: dynamodb,
      tableName: resourceName(regionResources.tables.spendLedger, env),
    });
    const reconciler = new Reconciler({
      redis,
      ledger,
      clock: systemClock,
      inFlight: {
        ttlMs: intEnv('IN_FLIGHT_TTL_MS', defaultInFlight.ttlMs, env),
        slotMs: intEnv('IN_FLIGHT_SLOT_MS', defaultInFlight.slotMs, env),
      },
      campaignsOfAccount: (a) => repo.listCampaignIds(a),
    });
    const theDay = day ?? dayWindow(systemClock.now(), budgets.account.timeZone).day;
    const plans = [...plansForBid(budgets, undefined), ...budgets.arms.values()];
    const out = [];
    for (const plan of plans) {
      out.push({
        plan: plan.planId,
        scope: plan.scope,
        day: theDay,
        ...(await reconciler.reconcile(plan, theDay, { force })),
      });
    }
    return out;
  } finally {
    redis.disconnect();
  }
}

const isMain = import.meta.url === `file://${process.argv[1]}`;
if (isMain && process.argv.slice(2).some((a) => a === '--help' || a === '-h')) {
  console.log(USAGE);
} else if (isMain) {
  main(process.argv.slice(2)).then(
    (result) => {
      console.log(JSON.stringify(result, null, 2));
    },
    (error: unknown) => {
      const known =
        error instanceof CliUsageError ||
        error instanceof BudgetValidationError ||
        error instanceof BudgetConflictError ||
        error instanceof BudgetNotFoundError ||
        error instanceof InvalidTimeZoneError ||
        error instanceof ControlParameterMissingError ||
        (error instanceof TypeError && (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS'));
      console.error(known ? `budgets: ${(error as Error).message}` : error);
      process.exit(known ? 2 : 1);
    },
  );
}
