/**
 * `npm run dead-letters -- <command>`: list and replay quarantined records. Talks to the
 * dead-letter table (DEAD_LETTER_TABLE, default `paceline-dead-letters`) and to the source
 * function's stream, both found through the region description, at the endpoints of
 * AWS_ENDPOINT_URL_DYNAMODB / AWS_ENDPOINT_URL_KINESIS (the local region's emulators, or AWS).
 *
 *   list   --source <function> [--reason <code>] [--limit N]
 *   replay --source <function> [--reason <code>] [--limit N]
 */
import { parseArgs } from 'node:util';
import { dynamoDbClient, endpointsFromEnv, kinesisClient } from '../shared/aws/clients.js';
import { KinesisProducer } from '../shared/kinesis/producer.js';
import { DeadLetterStore } from '../shared/quarantine/dead-letter-store.js';
import { replayDeadLetters, selectDeadLetters } from '../shared/quarantine/replay.js';
import { type FunctionSpec, regionResources, resourceName } from '../shared/region/resources.js';

/** Wrong command line; the message says what to type. */
export class DeadLettersUsageError extends Error {
  override readonly name = 'DeadLettersUsageError';
}

const sources = Object.values(regionResources.functions as Record<string, FunctionSpec>).filter(
  (f) => f.source,
);

const USAGE = `usage: dead-letters <list|replay> --source <${sources.map((f) => f.name).join('|')}> [--reason <code>] [--limit N]
  list    print the quarantined records (data as base64) with their reason
  replay  put them back on the function's stream (original partition key), deleting each once it is there`;

const options = {
  source: { type: 'string' },
  reason: { type: 'string' },
  limit: { type: 'string' },
} as const;

/** Runs one command; returns what to print. */
export async function main(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<unknown> {
  const { values, positionals } = parseArgs({ args: argv, options, allowPositionals: true, strict: true });
  const command = positionals[0];
  if (command !== 'list' && command !== 'replay') {
    throw new DeadLettersUsageError(`Unknown command "${positionals.join(' ')}".\n${USAGE}`);
  }
  const spec = sources.find((f) => f.name === values.source);
  if (!spec?.source) {
    throw new DeadLettersUsageError(`--source must name a stream function.\n${USAGE}`);
  }
  const limit = values.limit === undefined ? undefined : Number(values.limit);
  if (limit !== undefined && (!Number.isSafeInteger(limit) || limit <= 0)) {
    throw new DeadLettersUsageError(`--limit ${values.limit}: give a positive integer.`);
  }
  const endpoints = endpointsFromEnv(env);
  const dynamodb = dynamoDbClient(endpoints);
  const store = new DeadLetterStore({
    client: dynamodb,
    tableName: resourceName(regionResources.tables.deadLetters, env),
  });
  const selection = {
    source: spec.name,
    ...(values.reason === undefined ? {} : { reasonCode: values.reason }),
    ...(limit === undefined ? {} : { limit }),
  };
  try {
    if (command === 'list') {
      return (await selectDeadLetters(store, selection)).map((l) => ({
        shardId: l.shardId,
        sequenceNumber: l.sequenceNumber,
        partitionKey: l.partitionKey,
        reasonCode: l.reasonCode,
        reason: l.reason,
        arrivedAt: new Date(l.arrivedAt).toISOString(),
        quarantinedAt: new Date(l.quarantinedAt).toISOString(),
        data: Buffer.from(l.data).toString('base64'),
      }));
    }
    const kinesis = kinesisClient(endpoints);
    try {
      const producer = new KinesisProducer({
        client: kinesis,
        streamName: resourceName(regionResources.streams[spec.source.stream], env),
      });
      const result = await replayDeadLetters({ ...selection, store, put: (record) => producer.put(record) });
      await producer.flush();
      return {
        replayed: result.replayed,
        failed: result.failed.map((f) => ({ sequenceNumber: f.letter.sequenceNumber, error: f.error })),
      };
    } finally {
      kinesis.destroy();
    }
  } finally {
    dynamodb.destroy();
  }
}

const isMain = import.meta.url === `file://${process.argv[1]}`;
if (isMain && process.argv.slice(2).some((a) => a === '--help' || a === '-h')) {
  console.log(USAGE);
} else if (isMain) {
  main(process.argv.slice(2)).then(
    (result) => console.log(JSON.stringify(result, null, 2)),
    (error: unknown) => {
      const known =
        error instanceof DeadLettersUsageError ||
        (error instanceof TypeError && (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS'));
      console.error(known ? `dead-letters: ${(error as Error).message}` : error);
      process.exit(known ? 2 : 1);
    },
  );
}
