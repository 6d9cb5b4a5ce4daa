/**
 * Both stream functions publish their metrics once per invocation: the real handler modules,
 * loaded with metrics on, against a local region; stdout/stderr are captured and the EMF lines
 * counted. Batches of 250 and exactly 100 records are the sizes that used to produce several EMF
 * lines per invocation (Powertools flushes every 100 values of a metric) and a "No application
 * metrics to publish" warning (a flush emptied the store just before the end of the invocation).
 */
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import type { KinesisStreamEvent } from 'aws-lambda';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type LocalRegion, startLocalRegion } from '../../../local/region.js';
import { BudgetRepository } from '../../../shared/budget/repository.js';
import { encodeActionEvent } from '../../../shared/counting/event-encode.js';
import { kinesisBatchHandler } from '../../../shared/lambda/kinesis-batch.js';
import { DeadLetterStore } from '../../../shared/quarantine/dead-letter-store.js';
import { encodeSpendEvent } from '../../../shared/spend/events.js';
import { ManualClock } from '../../../shared/time/clock.js';
import {
  type KinesisHandler,
  loadKinesisHandler,
  testContext,
  testKinesisRecord,
} from '../../support/lambda.js';
import { impressionWire } from '../counting/fixtures.js';
import { seedBudgets } from '../spend/support.js';

let region: LocalRegion;
let ingestActions: KinesisHandler;
let trackSpend: KinesisHandler;

/** Everything written to stdout / stderr while capturing. */
const output = { out: [] as string[], err: [] as string[] };
const originalWrite = { out: process.stdout.write, err: process.stderr.write };

beforeAll(async () => {
  region = await startLocalRegion();
  ingestActions = await loadKinesisHandler(region, 'ingestActions', { metrics: true });
  trackSpend = await loadKinesisHandler(region, 'trackSpend', { metrics: true });
  const repo = new BudgetRepository({
    client: region.dynamodb,
    tableName: region.tableName('budgets'),
    pacerShards: region.description.settings.pacer.shards,
  });
  await seedBudgets(repo, {
    accountId: 'm-acc',
    timeZone: 'UTC',
    campaigns: [{ campaignId: 'm-c1', budgetMicros: 10_000_000_000 }],
  });
});

afterAll(async () => {
  await region?.stop();
});

beforeEach(() => {
  output.out = [];
  output.err = [];
  const capture = (into: string[]) =>
    ((chunk: string | Uint8Array) => {
      into.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8'));
      return true;
    }) as typeof process.stdout.write;
  process.stdout.write = capture(output.out);
  process.stderr.write = capture(output.err);
});

afterEach(() => {
  process.stdout.write = originalWrite.out;
  process.stderr.write = originalWrite.err;
});

/** EMF documents written since capture began. */
function emf(): Record<string, unknown>[] {
  return output.out
    .join('')
    .split('\n')
    .filter((line) => line.includes('"_aws"'))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

const noEmptyMetricsWarning = () =>
  expect([...output.out, ...output.err].join('')).not.toContain('No application metrics to publish');

function actionRecords(userId: string, n: number): KinesisStreamEvent {
  const now = Date.now();
  const records = Array.from({ length: n }, (_, i) =>
    testKinesisRecord(impressionWire(userId, i + 1, now - i), {
      partitionKey: userId,
      functionName: 'ingest-actions',
    }),
  );
  return { Records: records };
}

describe('one metrics flush per invocation', () => {
  it('ingest-actions: 250 records (a poison one, duplicates) → one EMF line with the sums', async () => {
    const batch = actionRecords('9001', 240);
    // 9 redeliveries of records already in the batch, and one truncated record (quarantined).
    for (let i = 0; i < 9; i++)
      batch.Records.push({ ...(batch.Records[i] as (typeof batch.Records)[number]) });
    const poison = encodeActionEvent({
      userId: '9001',
      timestamp: Date.now(),
      insertionId: Buffer.alloc(16, 9),
      action: 'click',
      ad: 1,
      adGroup: 1,
      campaign: 1,
      advertiser: 1,
    }).subarray(0, 30);
    batch.Records.push(testKinesisRecord(poison, { partitionKey: '9001', functionName: 'ingest-actions' }));
    const response = await ingestActions(batch, testContext('ingest-actions'));
    expect(response.batchItemFailures).toEqual([]);
    const docs = emf();
    expect(docs).toHaveLength(1);
    expect(docs[0]).toMatchObject({
      service: 'ingest-actions',
      RecordsProcessed: 250,
      RecordsQuarantined: 1,
      RecordsFailed: 0,
      ActionsCounted: 240,
      ActionsDuplicate: 9,
      ActionsRestamped: 0,
      ActionsExpired: 0,
    });
    noEmptyMetricsWarning();
  });

  it('ingest-actions: exactly 100 records → one EMF line, no empty-metrics warning', async () => {
    expect(
      (await ingestActions(actionRecords('9002', 100), testContext('ingest-actions'))).batchItemFailures,
    ).toEqual([]);
    const docs = emf();
    expect(docs).toHaveLength(1);
    expect(docs[0]).toMatchObject({ RecordsProcessed: 100, ActionsCounted: 100 });
    noEmptyMetricsWarning();
  });

  it('track-spend: 150 bids → one EMF line', async () => {
    const now = Date.now();
    const records = Array.from({ length: 150 }, (_, i) =>
      testKinesisRecord(
        encodeSpendEvent({
          v: 1,
          type: 'bid',
          bidId: `m-bid-${i}`,
          campaignId: 'm-c1',
          bidAt: now - i,
          bidPriceMicros: 1000,
        }),
        { partitionKey: 'm-c1', functionName: 'track-spend' },
      ),
    );
    const response = await trackSpend({ Records: records }, testContext('track-spend'));
    expect(response.batchItemFailures).toEqual([]);
    const docs = emf();
    expect(docs).toHaveLength(1);
    expect(docs[0]).toMatchObject({ service: 'track-spend', RecordsProcessed: 150, RecordsFailed: 0 });
    noEmptyMetricsWarning();
  });

  it('a batch where every record fails still publishes once, counting the failures', async () => {
    const metrics = new Metrics({ namespace: 'Paceline', serviceName: 'all-fail' });
    const handler = kinesisBatchHandler({
      source: 'all-fail',
      deadLetters: new DeadLetterStore({
        client: region.dynamodb,
        tableName: region.tableName('deadLetters'),
      }),
      clock: new ManualClock(Date.now()),
      logger: new Logger({ serviceName: 'all-fail', logLevel: 'SILENT' }),
      metrics,
      handleRecord: async () => {
        throw new Error('redis down');
      },
    });
    const records = Array.from({ length: 120 }, (_, i) => testKinesisRecord(Buffer.from(`r${i}`)));
    await expect(handler({ Records: records }, testContext('all-fail'))).rejects.toThrow();
    const docs = emf();
    expect(docs).toHaveLength(1);
    expect(docs[0]).toMatchObject({ service: 'all-fail', RecordsProcessed: 0, RecordsFailed: 120 });
    noEmptyMetricsWarning();
  });
});
