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
 *                (pacing modes: shared/pacing/modes.ts; `budgets --help` lists them; flights, dayparting,
 *                the plan's own curve: cli/plan-flags.ts)
 *   plan list    --account A [--campaign C]
 *   reconcile    --campaign C [--day YYYY-MM-DD] [--force]   (needs REDIS_NODES/REDIS_MODE, SPEND_LEDGER_TABLE)
 *   reshard      --shards N   (re-tags every item for N pacer shards: step 2 of the re-shard procedure, docs/pacing.md)
 *   rehome       --plan c:C:campaign --region R   (moves a plan's allocation authority, cli/rehome.ts)
 */
import { parseArgs } from 'node:util';
import { dynamoDbClient, ssmClient } from '../shared/aws/clients.js';
import { BudgetValidationError, plansForBid } from '../shared/budget/model.js';
import {
  BudgetConflictError,
  BudgetNotFoundError,
  BudgetRepository,
  type WriteMode,
} from '../shared/budget/repository.js';
import { dayWindow, InvalidDayError, InvalidTimeZoneError, parseDay } from '../shared/budget/time-zone.js';
import { InvalidEnvError, intEnv, MissingEnvError } from '../shared/config/env.js';
import { ControlParameterMissingError, resolvePacerShards } from '../shared/pacing/control.js';
import { connectRedis, type RedisConfig } from '../shared/redis/connect.js';
import { regionResources, resourceName } from '../shared/region/resources.js';
import { planDayKeys } from '../shared/spend/keys.js';
import { SpendLedger } from '../shared/spend/ledger.js';
import { readPlanDay } from '../shared/spend/live-counters.js';
import { budgetsTableReconciler, defaultInFlight } from '../shared/spend/reconcile.js';
import { systemClock } from '../shared/time/clock.js';
import { CliUsageError, EXIT, type ExitCodeOf, isUnreachable, joinNegativeValues, runCli } from './common.js';
import { NO_SSM, redisOf, type TargetNeeds, targetOf } from './paceline/target.js';
import { need, oneOf, planFromFlags } from './plan-flags.js';
import { rehome } from './rehome.js';
import { BUDGETS_USAGE, budgetsUsage } from './usage.js';

export { CliUsageError } from './common.js';
export { dollarsToMicros, parseMicros, planFromFlags } from './plan-flags.js';
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
  daypart: { type: 'string' },
  curve: { type: 'string' },
  'daypart-zone': { type: 'string' },
  day: { type: 'string' },
  force: { type: 'boolean', default: false },
  aws: { type: 'boolean', default: false },
  shards: { type: 'string' },
  plan: { type: 'string' },
  region: { type: 'string' },
} as const;

function writeMode(value: string): WriteMode {
  if (value !== 'create' && value !== 'update' && value !== 'upsert') {
    throw new CliUsageError(`--mode ${value}: use create, update or upsert.`);
  }
  return value;
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
