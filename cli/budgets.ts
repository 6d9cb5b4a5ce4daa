/**
 * `tsx cli/budgets.ts <command>`: create, update and list accounts, campaigns and budget plans in
 * the budgets table, and rebuild live spend counters from the ledger. Talks to the table named by
 * BUDGETS_TABLE (default `paceline-budgets`) at AWS_ENDPOINT_URL_DYNAMODB (the local region's
 * dynalite), or AWS with `--aws`. Prints its target first; human output, JSON with `--json`.
 * Input is parsed strictly (plain decimals, real calendar days, flags consistent with the plan
 * level, canonical zone names); an error is one line with a documented exit code, and nothing
 * is written. Writes tag items with their pacer shard: N comes from PACER_SHARDS, else the
 * region's SSM parameter `/paceline/<region>/pacer/shards` (docs/pacing.md).
 *
 *   account put  --id A --name N --tz America/Los_Angeles [--currency USD] [--mode create|update|upsert]
 *   account list
 *   campaign put --id C --account A --name N [--status active|paused] [--mode …]
 *   campaign list --account A
 *   plan put     --level account|campaign|arm --account A [--campaign C] [--arm X]
 *                (--daily-budget 1000.50 | --daily-budget-micros 1000500000) [--pacing <mode>] [--mode …]
 *                (pacing modes: shared/pacing/modes.ts; `budgets --help` lists them)
 *   plan list    --account A [--campaign C]
 *   reconcile    --campaign C [--day YYYY-MM-DD] [--force]   (needs REDIS_NODES/REDIS_MODE, SPEND_LEDGER_TABLE)
 *   reshard      --shards N   (re-tags every item for N pacer shards: step 2 of the re-shard procedure, docs/pacing.md)
 *   rehome       --plan c:C:campaign --region R   (moves a plan's allocation authority, cli/rehome.ts)
 */
import { parseArgs } from 'node:util';
import { dynamoDbClient, ssmClient } from '../shared/aws/clients.js';
import {
  type BudgetPlan,
  BudgetValidationError,
  type PlanLevel,
  plansForBid,
} from '../shared/budget/model.js';
import {
  BudgetConflictError,
  BudgetNotFoundError,
  BudgetRepository,
  type WriteMode,
} from '../shared/budget/repository.js';
import { dayWindow, InvalidDayError, InvalidTimeZoneError, parseDay } from '../shared/budget/time-zone.js';
import { InvalidEnvError, intEnv, MissingEnvError } from '../shared/config/env.js';
import { ControlParameterMissingError, resolvePacerShards } from '../shared/pacing/control.js';
import { type PacingMode, pacingModeIds } from '../shared/pacing/modes.js';
import { connectRedis, type RedisConfig } from '../shared/redis/connect.js';
import { regionResources, resourceName } from '../shared/region/resources.js';
import { planDayKeys } from '../shared/spend/keys.js';
import { SpendLedger } from '../shared/spend/ledger.js';
import { readPlanDay } from '../shared/spend/live-counters.js';
import { budgetsTableReconciler, defaultInFlight } from '../shared/spend/reconcile.js';
import { systemClock } from '../shared/time/clock.js';
import { CliUsageError, EXIT, type ExitCodeOf, isUnreachable, joinNegativeValues, runCli } from './common.js';
import { NO_SSM, redisOf, type TargetNeeds, targetOf } from './paceline/target.js';
import { rehome } from './rehome.js';
import { BUDGETS_USAGE, budgetsUsage } from './usage.js';

export { CliUsageError } from './common.js';
export { BUDGETS_USAGE } from './usage.js';

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
  'daily-cap': { type: 'string' },
  'daily-cap-micros': { type: 'string' },
  'flight-start': { type: 'string' },
  'flight-end': { type: 'string' },
  'flight-budget': { type: 'string' },
  'flight-budget-micros': { type: 'string' },
  pacing: { type: 'string', default: 'even' },
  day: { type: 'string' },
  force: { type: 'boolean', default: false },
  aws: { type: 'boolean', default: false },
  shards: { type: 'string' },
  plan: { type: 'string' },
  region: { type: 'string' },
} as const;

function need(value: string | undefined, flag: string): string {
  if (value === undefined || value === '')
    throw new CliUsageError(`--${flag} is required.\n${budgetsUsage()}`);
  return value;
}

function writeMode(value: string): WriteMode {
  if (value !== 'create' && value !== 'update' && value !== 'upsert') {
    throw new CliUsageError(`--mode ${value}: use create, update or upsert.`);
  }
  return value;
}

/**
 * Dollars ("1000.50") → integer micros, exactly (no float rounding). Strict: plain decimal
 * digits only — no sign, spaces, exponent (`1e6`), hex (`0x10`), leading zeros or empty string.
 */
export function dollarsToMicros(value: string, flag = 'daily-budget'): number {
  const m = /^(0|[1-9]\d{0,8})(?:\.(\d{1,6}))?$/.exec(value);
  if (value.startsWith('-'))
    throw new CliUsageError(
      `--${flag} ${JSON.stringify(value)}: a budget cannot be negative; give dollars such as 1000 or 1000.50 (0 spends nothing).`,
    );
  if (!m)
    throw new CliUsageError(
      `--${flag} ${JSON.stringify(value)}: give dollars as a plain decimal such as 1000 or 1000.50 (up to 6 decimals).`,
    );
  return Number(m[1]) * 1_000_000 + Number((m[2] ?? '').padEnd(6, '0'));
}

/** A plain non-negative decimal integer (`0`, `250000000`); nothing `Number()` would also accept. */
export function parseMicros(flag: string, value: string): number {
  if (value.startsWith('-'))
    throw new CliUsageError(
      `--${flag} ${JSON.stringify(value)}: cannot be negative; give plain digits, e.g. 250000000 for $250.`,
    );
  if (!/^(0|[1-9]\d{0,15})$/.test(value) || !Number.isSafeInteger(Number(value))) {
    throw new CliUsageError(
      `--${flag} ${JSON.stringify(value)}: give integer micros as plain digits, e.g. 250000000 for $250.`,
    );
  }
  return Number(value);
}

/** An amount given as `--<flag> <dollars>` or `--<flag>-micros <integer>` (exactly one). */
function amountMicros(values: Record<string, unknown>, flag: string): number {
  const dollars = values[flag] as string | undefined;
  const micros = values[`${flag}-micros`] as string | undefined;
  if ((dollars === undefined) === (micros === undefined)) {
    throw new CliUsageError(`Give exactly one of --${flag} <dollars> or --${flag}-micros <integer>.`);
  }
  if (dollars !== undefined) return dollarsToMicros(dollars, flag);
  return parseMicros(`${flag}-micros`, micros as string);
}

const FLIGHT_FLAGS = ['flight-start', 'flight-end', 'flight-budget', 'flight-budget-micros'] as const;

/**
 * The daily amount and the flight of `plan put`: `--daily-budget` alone, or a whole flight
 * (start, end, budget) with its `--daily-cap`; anything in between is refused with what is missing.
 */
function budgetAndFlight(values: Record<string, unknown>): Pick<BudgetPlan, 'dailyBudgetMicros' | 'flight'> {
  const flightGiven = FLIGHT_FLAGS.filter((f) => values[f] !== undefined);
  const capGiven = values['daily-cap'] !== undefined || values['daily-cap-micros'] !== undefined;
  if (flightGiven.length === 0) {
    if (capGiven) {
      throw new CliUsageError(
        '--daily-cap caps a flight: add --flight-start, --flight-end and --flight-budget, or give --daily-budget for a daily plan.',
      );
    }
    return { dailyBudgetMicros: amountMicros(values, 'daily-budget') };
  }
  if (values['daily-budget'] !== undefined || values['daily-budget-micros'] !== undefined) {
    throw new CliUsageError(
      "A flight plan's daily amount is its cap: give --daily-cap <dollars> instead of --daily-budget.",
    );
  }
  return {
    dailyBudgetMicros: amountMicros(values, 'daily-cap'),
    flight: {
      startDay: need(values['flight-start'] as string | undefined, 'flight-start'),
      endDay: need(values['flight-end'] as string | undefined, 'flight-end'),
      budgetMicros: amountMicros(values, 'flight-budget'),
    },
  };
}

function oneOf<T extends string>(flag: string, value: string, allowed: readonly T[]): T {
  if (!(allowed as readonly string[]).includes(value)) {
    throw new CliUsageError(`--${flag} ${JSON.stringify(value)}: use ${allowed.join(', ')}.`);
  }
  return value as T;
}

/** The ids a plan level takes, and no others (a stray --campaign on an account plan is refused). */
function planIds(values: { level?: string; campaign?: string; arm?: string }) {
  const level = oneOf<PlanLevel>('level', need(values.level, 'level'), ['account', 'campaign', 'arm']);
  if (level === 'account' && values.campaign !== undefined) {
    throw new CliUsageError('--level account takes no --campaign (the account plan covers every campaign).');
  }
  if (level !== 'arm' && values.arm !== undefined) {
    throw new CliUsageError(`--level ${level} takes no --arm: use --level arm for an arm plan.`);
  }
  return {
    level,
    ...(level === 'account' ? {} : { campaignId: need(values.campaign, 'campaign') }),
    ...(level === 'arm' ? { armId: need(values.arm, 'arm') } : {}),
  };
}

/**
 * The plan `plan put` writes, from its flags (strict: see {@link planIds}, {@link dollarsToMicros};
 * `--pacing` is any mode of the registry, shared/pacing/modes.ts). The repository validates it.
 */
export function planFromFlags(values: {
  level?: string;
  account?: string;
  campaign?: string;
  arm?: string;
  'daily-budget'?: string;
  'daily-budget-micros'?: string;
  'daily-cap'?: string;
  'daily-cap-micros'?: string;
  'flight-start'?: string;
  'flight-end'?: string;
  'flight-budget'?: string;
  'flight-budget-micros'?: string;
  pacing?: string;
}): BudgetPlan {
  return {
    ...planIds(values),
    accountId: need(values.account, 'account'),
    ...budgetAndFlight(values),
    pacingMode: oneOf('pacing', values.pacing ?? 'even', pacingModeIds()) as PacingMode,
  };
}

/** What a plan with a daily budget of 0 does (said with the result: 0 is not "paused"). */
export const ZERO_BUDGET_NOTE =
  'daily budget 0: this plan spends nothing until it is raised (bids under it answer no-budget); ' +
  'to stop a campaign, use campaign put --status paused';

/** Runs one command; returns what to print. `log` receives the target line. */
export async function main(
  argv: string[],
  env: NodeJS.ProcessEnv = process.env,
  log: (line: string) => void = () => {},
  now: () => number = Date.now,
): Promise<unknown> {
  const { values, positionals } = parseArgs({
    args: joinNegativeValues(argv, options),
    options,
    allowPositionals: true,
    strict: true,
  });
  const [what, verb] = positionals;
  const known = ['account put', 'account list', 'campaign put', 'campaign list', 'plan put', 'plan list'];
  const single =
    (what === 'reconcile' || what === 'reshard' || what === 'rehome') && positionals.length === 1;
  if (!single && !known.includes(positionals.join(' '))) {
    throw new CliUsageError(`Unknown command "${positionals.join(' ')}".\n${budgetsUsage()}`);
  }
  // What this command reaches: the budgets table; SSM for the pacer shard count of a write
  // (unless PACER_SHARDS says it); Redis and the ledger for reconcile.
  const needs: TargetNeeds = {
    services: verb === 'put' && !env.PACER_SHARDS ? ['dynamodb', 'ssm'] : ['dynamodb'],
    redis: what === 'reconcile',
  };
  const { target, text } = await targetOf(env, values.aws, needs, [
    `table ${resourceName(regionResources.tables.budgets, env)}`,
  ]);
  log(text);
  const endpoints = target.endpoints;
  const dynamodb = dynamoDbClient(endpoints);
  let pacerShards: number | undefined;
  if (verb === 'put') {
    // Without SSM in the target, PACER_SHARDS is set and resolvePacerShards never calls it.
    const ssm = needs.services.includes('ssm') ? ssmClient(endpoints) : undefined;
    try {
      pacerShards = await resolvePacerShards(env, ssm ?? NO_SSM, endpoints.region);
    } finally {
      ssm?.destroy();
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
          status: oneOf('status', values.status, ['active', 'paused']),
        },
        mode,
      );
    }
    if (what === 'campaign' && verb === 'list')
      return await repo.listCampaignIds(need(values.account, 'account'));
    if (what === 'plan' && verb === 'put') {
      const plan = await repo.putPlan(planFromFlags(values), mode);
      return plan.dailyBudgetMicros === 0 ? { ...plan, note: ZERO_BUDGET_NOTE } : plan;
    }
    if (what === 'plan' && verb === 'list')
      return await repo.listPlans(need(values.account, 'account'), values.campaign);
    if (what === 'rehome') {
      return await rehome({
        plan: values.plan,
        region: values.region,
        env,
        repo,
        dynamodb,
        tableName: resourceName(regionResources.tables.budgets, env),
        now: now(),
      });
    }
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
        endpoints.region,
        redisOf(target),
      );
    throw new CliUsageError(`Unknown command "${positionals.join(' ')}".\n${budgetsUsage()}`);
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
  region: string,
  redisConfig: RedisConfig,
): Promise<unknown> {
  if (day !== undefined) parseDay(day);
  const budgets = await repo.getCampaignBudgets(campaignId);
  if (!budgets) throw new BudgetNotFoundError(`Campaign ${campaignId} (or its account) does not exist.`);
  const today = dayWindow(systemClock.now(), budgets.account.timeZone).day;
  // No spend can exist for a day that has not begun in the advertiser's zone: nothing to rebuild.
  if (day !== undefined && day > today) {
    throw new CliUsageError(
      `--day ${day} has not begun in ${budgets.account.timeZone} (today there is ${today}): nothing to reconcile.`,
    );
  }
  const redis = connectRedis(redisConfig);
  redis.on('error', () => {});
  try {
    // The target region's live counters are rebuilt from (and compared with) its own wins only.
    const ledger = new SpendLedger({
      client: dynamodb,
      tableName: resourceName(regionResources.tables.spendLedger, env),
      region,
    });
    const reconciler = budgetsTableReconciler({
      redis,
      ledger,
      clock: systemClock,
      inFlight: {
        ttlMs: intEnv('IN_FLIGHT_TTL_MS', defaultInFlight.ttlMs, env),
        slotMs: intEnv('IN_FLIGHT_SLOT_MS', defaultInFlight.slotMs, env),
      },
      budgets: repo,
    });
    const theDay = day ?? today;
    const plans = [...plansForBid(budgets, undefined), ...budgets.arms.values()];
    const out = [];
    for (const plan of plans) {
      const result = await reconciler.reconcile(plan, theDay, { force });
      const id = { plan: plan.planId, scope: plan.scope, day: theDay };
      if (result.installed) {
        out.push({ ...id, outcome: 'rebuilt from the ledger', ...result });
        continue;
      }
      // Nothing was rebuilt: say what is actually there (live counters beside the ledger), not
      // just "skipped", so an operator sees whether the counters agree with the source of truth.
      const live = await readPlanDay(redis, planDayKeys(plan, theDay).state, systemClock.now());
      const entries = await reconciler.ledgerEntries(plan, theDay);
      const ledgerMicros = entries.reduce((sum, e) => sum + e.clearingPriceMicros, 0);
      const differs = live.confirmedMicros !== ledgerMicros;
      out.push({
        ...id,
        outcome:
          live.epoch === undefined
            ? 'not initialised (another process holds the rebuild; run again)'
            : 'already initialised: kept (--force rebuilds)',
        installed: false,
        epoch: live.epoch ?? null,
        confirmedMicros: live.confirmedMicros,
        inFlightMicros: live.inFlightMicros,
        leasedMicros: live.leasedMicros,
        ledgerWins: entries.length,
        ledgerConfirmedMicros: ledgerMicros,
        ...(differs
          ? {
              note:
                'live confirmed differs from the ledger: wins still being applied (track-spend, sweep-spend) ' +
                'converge within minutes; a lasting difference is fixed by --force',
            }
          : {}),
      });
    }
    return out;
  } finally {
    redis.disconnect();
  }
}

/** Exit codes of the budgets errors (documented in --help). */
export const budgetsExitCode: ExitCodeOf = (error) => {
  // The shard count could not be read because SSM was not reachable: a store, not the input.
  if (error instanceof ControlParameterMissingError && isUnreachable(error.cause)) return EXIT.unreachable;
  if (
    error instanceof BudgetValidationError ||
    error instanceof InvalidTimeZoneError ||
    error instanceof InvalidDayError ||
    error instanceof MissingEnvError ||
    error instanceof InvalidEnvError ||
    error instanceof ControlParameterMissingError
  )
    return EXIT.usage;
  if (error instanceof BudgetNotFoundError) return EXIT.notFound;
  if (error instanceof BudgetConflictError) return EXIT.conflict;
  return undefined;
};

if (import.meta.url === `file://${process.argv[1]}`) {
  runCli({
    name: 'budgets',
    usage: BUDGETS_USAGE,
    argv: process.argv.slice(2),
    main,
    exitCodeOf: budgetsExitCode,
  });
}
