/**
 * `npm run dead-letters -- <command>`: the records a function could not process, and the way
 * back. Every record that reaches a stream function is processed, or listed here:
 * - quarantined records (malformed content; dead-letter table, oversized payloads in the bucket):
 *   `list`, then `replay` puts their exact bytes back on the stream once the cause is fixed;
 * - batches Lambda gave up on (retries or record age exhausted: a crash loop, Redis down too
 *   long): `list --on-failure`, then `redrive` reads their shard and sequence range from the
 *   on-failure destination (the local runner's JSON-lines file, or the function's SQS queue in
 *   AWS), fetches those records from the stream and puts them on it again. Idempotent: the
 *   consumers deduplicate, an entry is acknowledged only after its records are back.
 *
 * Names come from the region description; endpoints from AWS_ENDPOINT_URL_* (the local region),
 * or AWS with `--aws`.
 */
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { GetQueueUrlCommand } from '@aws-sdk/client-sqs';
import type { AwsEndpoints, AwsService } from '../shared/aws/clients.js';
import { dynamoDbClient, kinesisClient } from '../shared/aws/clients.js';
import { s3Client, sqsClient } from '../shared/aws/ops-clients.js';
import { errorKind } from '../shared/errors.js';
import { KinesisProducer } from '../shared/kinesis/producer.js';
import { DeadLetterStore, S3PayloadStore } from '../shared/quarantine/dead-letter-store.js';
import {
  JsonLinesOnFailureSource,
  type OnFailureSource,
  redrive,
  SqsOnFailureSource,
} from '../shared/quarantine/redrive.js';
import { replayDeadLetters, selectDeadLetters } from '../shared/quarantine/replay.js';
import {
  type FunctionSpec,
  onFailureQueueName,
  regionResources,
  resourceName,
} from '../shared/region/resources.js';
import { CliUsageError, joinNegativeValues, PartialFailureError, runCli } from './common.js';
import { DEAD_LETTER_REASONS } from './dead-letter-reasons.js';
import { type TargetNeeds, targetOf } from './paceline/target.js';
import { DEAD_LETTERS_USAGE, streamFunctions } from './usage.js';

export { DEAD_LETTERS_USAGE } from './usage.js';

/** Wrong command line; the message says what to type. */
export class DeadLettersUsageError extends errorKind(
  'DeadLettersUsageError',
  'cli.dead-letters-usage',
  CliUsageError,
) {}

const sources = streamFunctions;

const options = {
  source: { type: 'string' },
  reason: { type: 'string' },
  limit: { type: 'string' },
  'on-failure': { type: 'boolean', default: false },
  from: { type: 'string' },
  file: { type: 'string' },
  'dry-run': { type: 'boolean', default: false },
  aws: { type: 'boolean', default: false },
} as const;

const repoRoot = fileURLToPath(new URL('..', import.meta.url));

/** What a dead-letters command reaches, from its parsed arguments. */
function needsOf(command: string, onFailure: boolean, from: 'local' | 'sqs'): TargetNeeds {
  let services: AwsService[];
  if (onFailure) {
    services = [
      ...(from === 'sqs' ? (['sqs'] as const) : []),
      ...(command === 'redrive' ? (['kinesis'] as const) : []),
    ];
  } else services = command === 'replay' ? ['dynamodb', 's3', 'kinesis'] : ['dynamodb'];
  return { services, redis: false };
}

/** A dead-letters command line, checked. */
interface DeadLettersCommand {
  readonly command: 'list' | 'replay' | 'redrive';
  /** The stream functions it applies to (every one for `list` without `--source`). */
  readonly chosen: readonly FunctionSpec[];
  readonly values: ReturnType<
    typeof parseArgs<{ options: typeof options; allowPositionals: true; strict: true }>
  >['values'];
  readonly limit: number | undefined;
  /** On-failure batches (`redrive`, `list --on-failure`) rather than quarantined records. */
  readonly onFailure: boolean;
  readonly from: 'local' | 'sqs';
}

/** `--source` and `--reason`: the stream functions a command applies to. */
function chosenSources(command: string, values: DeadLettersCommand['values']): readonly FunctionSpec[] {
  const names = sources.map((f) => f.name);
  if (values.source === undefined && command !== 'list') {
    throw new DeadLettersUsageError(
      `${command} needs --source <${names.join('|')}> (it writes to that function's stream).`,
    );
  }
  if (values.source !== undefined && !names.includes(values.source)) {
    throw new DeadLettersUsageError(
      `--source ${JSON.stringify(values.source)} must name a stream function: ${names.join('|')}.`,
    );
  }
  const chosen = sources.filter((f) => values.source === undefined || f.name === values.source);
  if (values.reason !== undefined) {
    const known = [...new Set(chosen.flatMap((f) => DEAD_LETTER_REASONS[f.name] ?? []))];
    if (!known.includes(values.reason)) {
      throw new DeadLettersUsageError(
        `--reason ${JSON.stringify(values.reason)} is not a reason code of ${chosen.map((f) => f.name).join(' or ')}: one of ${known.join(', ')}.`,
      );
    }
  }
  return chosen;
}

/** `--from`, `--file`, `--dry-run` and `--reason` against the kind of command. */
function onFailureSettings(
  onFailure: boolean,
  values: DeadLettersCommand['values'],
  aws: boolean,
): 'local' | 'sqs' {
  if (!onFailure && (values.from !== undefined || values.file !== undefined || values['dry-run'])) {
    throw new DeadLettersUsageError(
      '--from, --file and --dry-run apply to `list --on-failure` and `redrive`.',
    );
  }
  if (onFailure && values.reason !== undefined) {
    throw new DeadLettersUsageError(
      '--reason applies to quarantined records (list, replay), not to on-failure batches.',
    );
  }
  const from = values.from ?? (aws ? 'sqs' : 'local');
  if (from !== 'local' && from !== 'sqs') {
    throw new DeadLettersUsageError(`--from ${JSON.stringify(from)}: use local or sqs.`);
  }
  if (onFailure && from === 'local' && aws) {
    throw new DeadLettersUsageError(
      "--from local reads the local runner's files: drop --aws, or use --from sqs.",
    );
  }
  if (onFailure && values.file !== undefined && from !== 'local') {
    throw new DeadLettersUsageError('--file applies to --from local.');
  }
  return from;
}

/** Parses and checks a command line (one-line DeadLettersUsageError for anything wrong). */
function parseCommand(argv: string[], env: NodeJS.ProcessEnv): DeadLettersCommand {
  const { values, positionals } = parseArgs({
    args: joinNegativeValues(argv, options),
    options,
    allowPositionals: true,
    strict: true,
  });
  const command = positionals[0];
  if (positionals.length !== 1 || (command !== 'list' && command !== 'replay' && command !== 'redrive')) {
    throw new DeadLettersUsageError(`Unknown command "${positionals.join(' ')}".\n${DEAD_LETTERS_USAGE}`);
  }
  const chosen = chosenSources(command, values);
  const limit = values.limit === undefined ? undefined : Number(values.limit);
  if (limit !== undefined && (!/^[1-9]\d*$/.test(values.limit ?? '') || !Number.isSafeInteger(limit))) {
    throw new DeadLettersUsageError(`--limit ${JSON.stringify(values.limit)}: give a positive integer.`);
  }
  const onFailure = command === 'redrive' || values['on-failure'];
  const from = onFailureSettings(onFailure, values, values.aws || env.PACELINE_TARGET === 'aws');
  return { command, chosen, values, limit, onFailure, from };
}

/** Runs one command; returns what to print. `log` receives the target line. */
export async function main(
  argv: string[],
  env: NodeJS.ProcessEnv = process.env,
  log: (line: string) => void = () => {},
): Promise<unknown> {
  const cmd = parseCommand(argv, env);
  const needs = needsOf(cmd.command, cmd.onFailure, cmd.from);
  const region = (env.AWS_REGION || env.AWS_DEFAULT_REGION || env.PACELINE_REGION) ?? 'us-east-1';
  const onFailureFile = (fn: FunctionSpec) =>
    cmd.values.file ?? join(repoRoot, '.local', region, 'on-failure', `${fn.name}.jsonl`);
  const { target, text } = await targetOf(env, cmd.values.aws, needs, [
    ...(cmd.onFailure && cmd.from === 'local'
      ? cmd.chosen.map((f) => `on-failure file ${onFailureFile(f)}`)
      : []),
  ]);
  log(text);
  return cmd.onFailure
    ? onFailureCommand(cmd, target.endpoints, env, onFailureFile, log)
    : quarantineCommand(cmd, target.endpoints, env);
}

/** The stream a function reads (where its records are put back). */
function streamOf(spec: FunctionSpec, env: NodeJS.ProcessEnv): string {
  return resourceName(regionResources.streams[spec.source?.stream ?? 'actions'], env);
}

/** `list --on-failure` and `redrive`: on-failure batches from the local file or the SQS queue. */
async function onFailureCommand(
  cmd: DeadLettersCommand,
  endpoints: AwsEndpoints,
  env: NodeJS.ProcessEnv,
  onFailureFile: (fn: FunctionSpec) => string,
  log: (line: string) => void,
): Promise<unknown> {
  const sqs = cmd.from === 'sqs' ? sqsClient(endpoints) : undefined;
  const kinesis = cmd.command === 'redrive' ? kinesisClient(endpoints) : undefined;
  try {
    const sourceOf = async (fn: FunctionSpec): Promise<OnFailureSource> => {
      if (!sqs) return new JsonLinesOnFailureSource(onFailureFile(fn));
      const queue = await sqs.send(new GetQueueUrlCommand({ QueueName: onFailureQueueName(fn.name) }));
      return new SqsOnFailureSource(sqs, queue.QueueUrl ?? '', cmd.command === 'redrive' ? 900 : 0);
    };
    if (cmd.command === 'list') {
      const out = [];
      for (const fn of cmd.chosen) {
        for (const e of await (await sourceOf(fn)).entries()) {
          out.push({
            source: fn.name,
            id: e.id,
            shardId: e.batch.shardId,
            startSequenceNumber: e.batch.startSequenceNumber,
            endSequenceNumber: e.batch.endSequenceNumber,
            records: e.batch.batchSize,
            condition: e.condition,
            at: e.timestamp,
            ...(e.error ? { error: e.error } : {}),
          });
        }
      }
      return out;
    }
    const spec = cmd.chosen[0] as FunctionSpec;
    const streamName = streamOf(spec, env);
    const source = await sourceOf(spec);
    log(`on-failure entries from ${source.location}`);
    const client = kinesis as NonNullable<typeof kinesis>;
    const producer = new KinesisProducer({ client, streamName });
    const result = await redrive({
      source,
      kinesis: client,
      streamName,
      dryRun: cmd.values['dry-run'],
      put: async (records) => {
        await producer.putAll(records);
        await producer.flush();
      },
    });
    if (result.failed.length > 0) {
      throw new PartialFailureError(
        `${result.failed.length} on-failure entries could not be re-driven`,
        result,
      );
    }
    return result;
  } finally {
    kinesis?.destroy();
    sqs?.destroy();
  }
}

/** `list` and `replay` of quarantined records (the dead-letter table, payloads in S3). */
async function quarantineCommand(
  cmd: DeadLettersCommand,
  endpoints: AwsEndpoints,
  env: NodeJS.ProcessEnv,
): Promise<unknown> {
  const dynamodb = dynamoDbClient(endpoints);
  // Listing reads the table only (an offloaded payload is shown by its s3:// reference); a
  // replay reads payloads back from the bucket.
  const s3 = cmd.command === 'replay' ? s3Client(endpoints) : undefined;
  const store = new DeadLetterStore({
    client: dynamodb,
    tableName: resourceName(regionResources.tables.deadLetters, env),
    ...(s3
      ? {
          payloads: new S3PayloadStore({
            client: s3,
            bucket: resourceName(regionResources.buckets.deadLetterPayloads, env),
          }),
        }
      : {}),
  });
  const { limit, values } = cmd;
  const selection = (fn: FunctionSpec) => ({
    source: fn.name,
    ...(values.reason === undefined ? {} : { reasonCode: values.reason }),
    ...(limit === undefined ? {} : { limit }),
  });
  try {
    if (cmd.command === 'list') {
      const out = [];
      for (const fn of cmd.chosen) {
        for (const l of await selectDeadLetters(store, selection(fn))) out.push(listedLetter(fn, l));
      }
      return limit === undefined ? out : out.slice(0, limit);
    }
    const spec = cmd.chosen[0] as FunctionSpec;
    const kinesis = kinesisClient(endpoints);
    try {
      const producer = new KinesisProducer({ client: kinesis, streamName: streamOf(spec, env) });
      const result = await replayDeadLetters({
        ...selection(spec),
        store,
        put: (record) => producer.put(record),
      });
      await producer.flush();
      const out = {
        replayed: result.replayed,
        failed: result.failed.map((f) => ({ sequenceNumber: f.letter.sequenceNumber, error: f.error })),
      };
      if (out.failed.length > 0)
        throw new PartialFailureError(`${out.failed.length} letters were not replayed`, out);
      return out;
    } finally {
      kinesis.destroy();
    }
  } finally {
    dynamodb.destroy();
    s3?.destroy();
  }
}

/** One quarantined record as `list` prints it. */
function listedLetter(fn: FunctionSpec, l: Awaited<ReturnType<typeof selectDeadLetters>>[number]) {
  return {
    source: fn.name,
    shardId: l.shardId,
    sequenceNumber: l.sequenceNumber,
    partitionKey: l.partitionKey,
    reasonCode: l.reasonCode,
    reason: l.reason,
    arrivedAt: new Date(l.arrivedAt).toISOString(),
    quarantinedAt: new Date(l.quarantinedAt).toISOString(),
    bytes: l.dataBytes ?? l.data.length,
    ...(l.dataRef === undefined ? { data: Buffer.from(l.data).toString('base64') } : { dataRef: l.dataRef }),
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  runCli({
    name: 'dead-letters',
    usage: DEAD_LETTERS_USAGE,
    argv: process.argv.slice(2),
    main,
    exitCodeOf: () => undefined,
  });
}
