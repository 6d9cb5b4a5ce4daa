/**
 * docs/reliability.md, fault 6: a worker crash loop sends batches to the on-failure destination (metadata
 * only: shard and sequence range). `dead-letters redrive` reads those entries, fetches the records
 * from the stream and puts them on it again; once the function works, nothing is lost, and a
 * second redrive (or the same entry re-driven twice) counts nothing twice. Both destinations:
 * the local runner's JSON-lines file and, for AWS, the function's SQS on-failure queue (here on
 * the local SQS endpoint, with the real SDK client). Real poller semantics (retries, bisect),
 * the real ingest-actions handler, real Redis / dynalite / kinesalite.
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { CreateQueueCommand, GetQueueAttributesCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../../cli/dead-letters.js';
import { type RunningSqs, startSqsServer } from '../../../local/emulators/sqs-server.js';
import { MemoryCheckpointStore } from '../../../local/esm/checkpoints.js';
import { LocalOnFailureDestination } from '../../../local/esm/on-failure.js';
import { KinesisPoller } from '../../../local/esm/poller.js';
import { type LocalRegion, startLocalRegion } from '../../../local/region.js';
import { InProcessInvoker, type LocalHandler } from '../../../local/worker/in-process-invoker.js';
import { sqsClient } from '../../../shared/aws/ops-clients.js';
import { encodeActionEvent } from '../../../shared/counting/event-encode.js';
import { ActionStore } from '../../../shared/counting/store.js';
import { KinesisProducer } from '../../../shared/kinesis/producer.js';
import { connectRedis, type RedisClient, redisConfigFromEnv } from '../../../shared/redis/connect.js';
import { onFailureQueueName, regionResources } from '../../../shared/region/resources.js';
import { MINUTE_MS, systemClock } from '../../../shared/time/clock.js';
import { type KinesisHandler, loadKinesisHandler } from '../../support/lambda.js';
import { tempDir } from '../../support/tmp.js';

let region: LocalRegion;
let sqs: RunningSqs;
let handler: KinesisHandler;
let redis: RedisClient;
let store: ActionStore;

beforeAll(async () => {
  region = await startLocalRegion();
  sqs = await startSqsServer();
  handler = await loadKinesisHandler(region, 'ingestActions');
  redis = connectRedis(redisConfigFromEnv(region.functionEnv('ingestActions')));
  store = new ActionStore({ redis, clock: systemClock });
});

afterAll(async () => {
  redis?.disconnect();
  await sqs?.stop();
  await region?.stop();
});

const count = async (userId: string) =>
  (await store.countText(`SELECT COUNT(*) FROM actions WHERE user = ${userId} AND time > now() - 1d`)).total;

function event(userId: string, i: number): Buffer {
  return encodeActionEvent({
    userId,
    timestamp: Date.now() - (i + 1) * MINUTE_MS,
    insertionId: `${'ab'.repeat(15)}${String(i).padStart(2, '0')}`,
    action: 'click',
    ad: 5,
    adGroup: 6,
    campaign: 7,
    advertiser: 8,
  });
}

describe('dead-letters redrive after a crash loop', () => {
  it('re-drives on-failure batches from the local file and from SQS: 0 lost, nothing doubled', async () => {
    let crashing = true;
    const crashLoop: LocalHandler = async (event, context) => {
      // What Lambda reports when the runtime process dies (the worker exits on every invoke).
      if (crashing)
        throw Object.assign(new Error('Runtime exited with error: signal: killed'), {
          name: 'Runtime.ExitError',
        });
      return handler(event, context);
    };
    const file = join(tempDir('paceline-redrive-'), 'ingest-actions.jsonl');
    const onFailure = new LocalOnFailureDestination({ file });
    const poller = new KinesisPoller({
      kinesis: region.kinesis,
      streamName: region.streamName('actions'),
      source: { ...regionResources.functions.ingestActions.source, maxBatchingWindowSeconds: 0 },
      invoker: new InProcessInvoker({ functionName: 'ingest-actions', handler: crashLoop }),
      onFailure,
      checkpoints: new MemoryCheckpointStore(),
      idlePollMs: 20,
      retryBaseDelayMs: 5,
      retryMaxDelayMs: 50,
    });
    await poller.start();
    try {
      const producer = new KinesisProducer({
        client: region.kinesis,
        streamName: region.streamName('actions'),
      });
      await producer.putAll(
        [event('9001', 0), event('9001', 1)].map((data) => ({ data, partitionKey: '9001' })),
      );
      await poller.waitForIdle(60_000);
      // The crash loop: both events went to the on-failure destination, none was counted.
      expect(onFailure.records.reduce((a, r) => a + r.KinesisBatchInfo.batchSize, 0)).toBe(2);
      expect(await count('9001')).toBe(0);

      crashing = false; // the fix is deployed
      const listed = (await main(
        ['list', '--on-failure', '--source', 'ingest-actions', '--file', file],
        region.clientEnv,
      )) as {
        records: number;
        condition: string;
        error?: string;
      }[];
      expect(listed.reduce((a, e) => a + e.records, 0)).toBe(2);
      expect(
        listed.every(
          (e) => e.condition === 'RetryAttemptsExhausted' && /Runtime.ExitError/.test(e.error ?? ''),
        ),
      ).toBe(true);
      const first = await main(['redrive', '--source', 'ingest-actions', '--file', file], region.clientEnv);
      expect(first).toEqual({ entries: listed.length, redriven: listed.length, records: 2, failed: [] });
      await poller.waitForIdle(60_000);
      expect(await count('9001')).toBe(2);
      // Idempotent: nothing left to re-drive; re-driving the same entries again changes no count.
      expect(
        await main(['redrive', '--source', 'ingest-actions', '--file', file], region.clientEnv),
      ).toMatchObject({
        entries: 0,
        records: 0,
      });
      rmSync(`${file}.redriven`);
      await main(['redrive', '--source', 'ingest-actions', '--file', file], region.clientEnv);
      await poller.waitForIdle(60_000);
      expect(await count('9001')).toBe(2);

      // AWS: the same on-failure records as messages of the function's SQS queue.
      const client = sqsClient({ region: region.region, sqs: sqs.url });
      const { QueueUrl } = await client.send(
        new CreateQueueCommand({ QueueName: onFailureQueueName('ingest-actions') }),
      );
      crashing = true;
      await producer.putAll(
        [event('9002', 0), event('9002', 1)].map((data) => ({ data, partitionKey: '9002' })),
      );
      const before = onFailure.records.length;
      await poller.waitForIdle(60_000);
      for (const record of onFailure.records.slice(before)) {
        await client.send(new SendMessageCommand({ QueueUrl, MessageBody: JSON.stringify(record) }));
      }
      expect(await count('9002')).toBe(0);
      crashing = false;
      const env = { ...region.clientEnv, AWS_ENDPOINT_URL_SQS: sqs.url };
      const fromSqs = (await main(['redrive', '--source', 'ingest-actions', '--from', 'sqs'], env)) as {
        records: number;
      };
      expect(fromSqs).toMatchObject({ records: 2, failed: [] });
      await poller.waitForIdle(60_000);
      expect(await count('9002')).toBe(2);
      const attrs = await client.send(new GetQueueAttributesCommand({ QueueUrl, AttributeNames: ['All'] }));
      expect(attrs.Attributes?.ApproximateNumberOfMessages).toBe('0');
      expect(attrs.Attributes?.ApproximateNumberOfMessagesNotVisible).toBe('0');
      client.destroy();
    } finally {
      await poller.stop();
    }
  }, 120_000);
});
