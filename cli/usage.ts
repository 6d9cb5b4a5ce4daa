/**
 * The usage texts of `npm run budgets` and `npm run dead-letters` (also `paceline budgets|dead-letters
 * --help`), apart from the commands themselves: printing help loads no AWS SDK module.
 */
import { pacingModeIds, pacingModesHelp } from '../shared/pacing/modes.js';
import { type FunctionSpec, regionResources } from '../shared/region/resources.js';

/** The stream functions (those with a Kinesis source): the `--source` values of dead-letters. */
export const streamFunctions = Object.values(
  regionResources.functions as Record<string, FunctionSpec>,
).filter((f) => f.source);
const sources = streamFunctions;

/** The usage lines of `budgets rehome` (part of `budgets --help`). */
export const REHOME_USAGE = `  rehome       --plan <c:C:campaign | c:C:arm:X | a:A:account> --region <region>   (move the plan's allocation authority; docs/pacing.md)`;

/** `budgets --help`, with the pacing modes known now (shared/pacing/modes.ts). */
export function budgetsUsage(): string {
  return `usage: budgets <account|campaign|plan> <put|list> [options] [--json] [--aws] | budgets reconcile --campaign C [--day D] [--force]
  account put  --id A --name N --tz <IANA zone> [--currency USD] [--mode create|update|upsert]
  account list
  campaign put --id C --account A --name N [--status active|paused] [--mode …]
  campaign list --account A
  plan put     --level account|campaign|arm --account A [--campaign C] [--arm X]
               (--daily-budget <dollars> | --daily-budget-micros <int>) [--pacing ${pacingModeIds().join('|')}] [--mode …]
               a flight: --flight-start YYYY-MM-DD --flight-end YYYY-MM-DD (--flight-budget <dollars> |
               --flight-budget-micros <int>) (--daily-cap <dollars> | --daily-cap-micros <int>): the flight's
               remaining budget is spread over its remaining days, never above the daily cap (docs/spend.md, "Flights")
               dayparting: --daypart "mon-fri 08:00-20:00; sat 10:00-14:00" [--daypart-zone <IANA zone>]: the plan
               bids only inside these local windows (quarter hours; zone: the account's unless given; docs/spend.md)
               --pacing curve --curve FILE: the plan's own curve, 24 (hourly) or 96 (quarter-hourly) shares of the
               local day summing to 1, as a JSON array or one number per line
  plan list    --account A [--campaign C]
  reconcile    --campaign C [--day YYYY-MM-DD] [--force]
  reshard      --shards N   (re-tag every item for N pacer shards; docs/pacing.md, "Changing N")
${REHOME_USAGE}
  pacing modes (--pacing, default even):
${pacingModesHelp('    ')}
  amounts: --daily-budget 1000 or 1000.50 (plain decimal, ≤ 6 decimals), --daily-budget-micros 1000500000 (plain integer)
  a daily budget of 0 is allowed: the plan spends nothing that day (its bids answer no-budget); to stop a
  campaign, set it --status paused instead
  target: a local region's variables (source .paceline/<region>.env), or --aws (PACELINE_TARGET=aws) for AWS
  exit codes: 0 ok, 1 unexpected error, 2 usage or invalid input, 3 not found, 4 conflict, 6 a store could not be reached`;
}

/** {@link budgetsUsage} as the modules load (the built-in pacing modes). */
export const BUDGETS_USAGE = budgetsUsage();

export const DEAD_LETTERS_USAGE = `usage: dead-letters <command> [--source <${sources.map((f) => f.name).join('|')}>] [options] [--json] [--aws]
  list    [--source F] [--reason <code>] [--limit N]   quarantined records with their reason (every stream
          function's without --source; payload base64, or its s3:// reference)
  replay  --source F [--reason <code>] [--limit N]   put them back on the function's stream, deleting each once it is there
  list --on-failure [--source F] [--from local|sqs] [--file F]   batches Lambda gave up on (shard, sequence range, condition)
  redrive --source F [--from local|sqs] [--file F] [--dry-run]  fetch those records from the stream and put them on it again
  --reason one of the function's reason codes (docs/runbook.md), e.g. spend.unsubstituted-macro
  --from   where on-failure entries are: local = the local runner's file (the default for a local region:
           .local/<region>/on-failure/<function>.jsonl, or --file), sqs = the function's on-failure queue (the
           default with --aws; locally only with AWS_ENDPOINT_URL_SQS set)
  --aws    act on AWS (the default credential chain); without it only a local region (its variables in the environment)`;
