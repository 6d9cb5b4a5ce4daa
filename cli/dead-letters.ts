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
import { dynamoDbClient, kinesisClient, s3Client, sqsClient } from '../shared/aws/clients.js';
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
import { CliUsageError, PartialFailureError, runCli, targetOf } from './common.js';

/** Wrong command line; the message says what to type. */
export class DeadLettersUsageError extends CliUsageError {
  override readonly name = 'DeadLettersUsageError';
}

const sources = Object.values(regionResources.functions as Record<string, FunctionSpec>).filter(
  (f) => f.source,
);

export const DEAD_LETTERS_USAGE = `usage: dead-letters <command> --source <${sources.map((f) => f.name).join('|')}> [options] [--json] [--aws]
  list    [--reason <code>] [--limit N]   quarantined records with their reason (payload base64, or its s3:// reference)
  replay  [--reason <code>] [--limit N]   put them back on the function's stream, deleting each once it is there
  list --on-failure [--from local|sqs] [--file F]   batches Lambda gave up on (shard, sequence range, condition)
  redrive [--from local|sqs] [--file F] [--dry-run]  fetch those records from the stream and put them on it again
  --from   where on-failure entries are: local = the local runner's file (default when AWS_ENDPOINT_URL_KINESIS is set:
           .local/<region>/on-failure/<function>.jsonl, or --file), sqs = the function's on-failure queue
  --aws    act on AWS (the default credential chain) when no local endpoint variable is set`;

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

/** Runs one command; returns what to print. `log` receives the target line. */
export async function main(
  argv: string[],
  env: NodeJS.ProcessEnv = process.env,
  log: (line: string) => void = () => {},
): Promise<unknown> {
  const { values, positionals } = parseArgs({ args: argv, options, allowPositionals: true, strict: true });
  const command = positionals[0];
  if (positionals.length !== 1 || !['list', 'replay', 'redrive'].includes(command ?? '')) {
    throw new DeadLettersUsageError(`Unknown command "${positionals.join(' ')}".\n${DEAD_LETTERS_USAGE}`);
  }
  const spec = sources.find((f) => f.name === values.source);
  if (!spec?.source) {
    throw new DeadLettersUsageError(
      `--source ${JSON.stringify(values.source ?? '')} must name a stream function: ${sources.map((f) => f.name).join(', ')}.\n${DEAD_LETTERS_USAGE}`,
    );
  }
  const limit = values.limit === undefined ? undefined : Number(values.limit);
  if (limit !== undefined && (!/^[1-9]\d*$/.test(values.limit ?? '') || !Number.isSafeInteger(limit))) {
    throw new DeadLettersUsageError(`--limit ${JSON.stringify(values.limit)}: give a positive integer.`);
  }
  const onFailure = command === 'redrive' || values['on-failure'];
  if (!onFailure && (values.from !== undefined || values.file !== undefined || values['dry-run'])) {
    throw new DeadLettersUsageError(
      '--from, --file and --dry-run apply to `list --on-failure` and `redrive`.',
    );
  }
  const target = targetOf(env, values.aws);
  log(`target ${target.text}`);
  const { endpoints } = target;
  const streamName = resourceName(regionResources.streams[spec.source.stream], env);

  if (onFailure) {
    const from = values.from ?? (endpoints.kinesis ? 'local' : 'sqs');
    if (from !== 'local' && from !== 'sqs') {
      throw new DeadLettersUsageError(`--from ${JSON.stringify(from)}: use local or sqs.`);
    }
    const sqs = from === 'sqs' ? sqsClient(endpoints) : undefined;
    const kinesis = kinesisClient(endpoints);
    try {
      let source: OnFailureSource;
      if (sqs) {
        const queue = await sqs.send(new GetQueueUrlCommand({ QueueName: onFailureQueueName(spec.name) }));
        source = new SqsOnFailureSource(sqs, queue.QueueUrl ?? '', command === 'redrive' ? 900 : 0);
      } else {
        source = new JsonLinesOnFailureSource(
          values.file ?? join(repoRoot, '.local', endpoints.region, 'on-failure', `${spec.name}.jsonl`),
        );
      }
      log(`on-failure entries from ${source.location}`);
      if (command === 'list') {
        return (await source.entries()).map((e) => ({
          id: e.id,
          shardId: e.batch.shardId,
          startSequenceNumber: e.batch.startSequenceNumber,
          endSequenceNumber: e.batch.endSequenceNumber,
          records: e.batch.batchSize,
          condition: e.condition,
          at: e.timestamp,
          ...(e.error ? { error: e.error } : {}),
        }));
      }
      const producer = new KinesisProducer({ client: kinesis, streamName });
      const result = await redrive({
        source,
        kinesis,
        streamName,
        dryRun: values['dry-run'],
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
      kinesis.destroy();
      sqs?.destroy();
    }
  }

  const dynamodb = dynamoDbClient(endpoints);
  const s3 = s3Client(endpoints);
  const store = new DeadLetterStore({
    client: dynamodb,
    tableName: resourceName(regionResources.tables.deadLetters, env),
    payloads: new S3PayloadStore({
      client: s3,
      bucket: resourceName(regionResources.buckets.deadLetterPayloads, env),
    }),
  });
  const selection = {
    source: spec.name,
    ...(values.reason === undefined ? {} : { reasonCode: values.reason }),
    ...(limit === undefined ? {} : { limit }),
  };
  try {
    if (command === 'redrive' || values['on-failure']) throw new Error('unreachable');
    if (command === 'list') {
      return (await selectDeadLetters(store, selection)).map((l) => ({
        shardId: l.shardId,
        sequenceNumber: l.sequenceNumber,
        partitionKey: l.partitionKey,
        reasonCode: l.reasonCode,
        reason: l.reason,
        arrivedAt: new Date(l.arrivedAt).toISOString(),
        quarantinedAt: new Date(l.quarantinedAt).toISOString(),
        bytes: l.dataBytes ?? l.data.length,
        ...(l.dataRef === undefined
          ? { data: Buffer.from(l.data).toString('base64') }
          : { dataRef: l.dataRef }),
      }));
    }
    const kinesis = kinesisClient(endpoints);
    try {
      const producer = new KinesisProducer({ client: kinesis, streamName });
      const result = await replayDeadLetters({ ...selection, store, put: (record) => producer.put(record) });
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
    s3.destroy();
  }
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
