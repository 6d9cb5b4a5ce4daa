/**
 * docs/reliability.md, fault 3: records that are hard to quarantine (and would take their whole
 * batch to the on-failure destination) are quarantined, listed by `dead-letters list` and
 * replayable, through the real track-spend handler, dynalite and the S3 emulator:
 * - a 900 KB record (Kinesis allows 1 MB, a dead-letter item 400 KB) whose reason would also
 *   echo the huge field: the payload goes to the bucket, the letter keeps the reference, the
 *   reason is bounded;
 * - KPL sub-records whose partition-key index is outside the aggregate's key table (one with a
 *   valid win inside, one with garbage): quarantined with their own reason under the aggregate's
 *   partition key, while the aggregate's good sub-record is booked.
 * Replay puts every one back on the stream; the valid win is then booked.
 */
import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import { GetRecordsCommand, GetShardIteratorCommand, ListShardsCommand } from '@aws-sdk/client-kinesis';
import { HeadObjectCommand } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../../cli/dead-letters.js';
import { type LocalRegion, startLocalRegion } from '../../../local/region.js';
import { BudgetRepository } from '../../../shared/budget/repository.js';
import { dayWindow } from '../../../shared/budget/time-zone.js';
import { encodeSpendEvent, type WinEvent } from '../../../shared/spend/events.js';
import { SpendLedger } from '../../../shared/spend/ledger.js';
import {
  type KinesisHandler,
  loadKinesisHandler,
  testContext,
  testKinesisRecord,
} from '../../support/lambda.js';
import { seedBudgets } from '../spend/support.js';

const TZ = 'UTC';
let region: LocalRegion;
let handler: KinesisHandler;
let ledger: SpendLedger;

beforeAll(async () => {
  region = await startLocalRegion();
  handler = await loadKinesisHandler(region, 'trackSpend');
  ledger = new SpendLedger({
    client: region.dynamodb,
    tableName: region.tableName('spendLedger'),
    region: region.region,
  });
  await seedBudgets(
    new BudgetRepository({
      client: region.dynamodb,
      tableName: region.tableName('budgets'),
      pacerShards: region.description.settings.pacer.shards,
    }),
    {
      accountId: 'acc-q',
      timeZone: TZ,
      campaigns: [{ campaignId: 'c-q', budgetMicros: 1_000_000_000 }],
    },
  );
});

afterAll(async () => {
  await region?.stop();
});

/** The library's protobuf codec of the KPL format (not re-exported by its entry point). */
const kpl = createRequire(import.meta.url)('aws-kinesis-agg/lib/common.js') as {
  AggregatedRecord: { encode(message: unknown): { finish(): Uint8Array }; fromObject(o: unknown): unknown };
  magic: Buffer;
};

/** A KPL aggregate whose sub-records name the given partition-key indexes (table: ['c-q']). */
function aggregate(records: { data: Buffer; keyIndex: number }[]): Buffer {
  const message = kpl.AggregatedRecord.fromObject({
    partition_key_table: ['c-q'],
    explicit_hash_key_table: [],
    records: records.map((r) => ({ partition_key_index: r.keyIndex, data: r.data })),
  });
  const body = Buffer.from(kpl.AggregatedRecord.encode(message).finish());
  return Buffer.concat([kpl.magic, body, createHash('md5').update(body).digest()]);
}

const win = (bidId: string, extra: Partial<WinEvent> = {}): WinEvent => ({
  v: 1,
  type: 'win',
  bidId,
  campaignId: 'c-q',
  bidAt: Date.now() - 2000,
  bidPriceMicros: 3000,
  at: Date.now() - 1000,
  clearingPriceMicros: 2000,
  ...extra,
});

async function ledgerBids(): Promise<string[]> {
  return (await ledger.entries('c-q', dayWindow(Date.now() - 2000, TZ).day)).map((e) => e.bidId).sort();
}

describe('quarantine that cannot fail', () => {
  it('oversized and bad-KPL records are listed and replayable', async () => {
    const huge = Buffer.from(JSON.stringify({ ...win('w-huge'), bidId: 'x'.repeat(900 * 1024) }));
    const aggregated = aggregate([
      { data: encodeSpendEvent(win('w-good')), keyIndex: 0 },
      { data: encodeSpendEvent(win('w-bad-index')), keyIndex: 7 },
      { data: Buffer.from('not json at all'), keyIndex: 9 },
    ]);
    const context = testContext('track-spend');
    const out = await handler(
      {
        Records: [
          testKinesisRecord(huge, { functionName: 'track-spend', partitionKey: 'c-q' }),
          testKinesisRecord(aggregated, { functionName: 'track-spend', partitionKey: 'c-q' }),
        ],
      },
      context,
    );
    // Nothing failed, so nothing goes to the on-failure destination with its batch.
    expect(out.batchItemFailures).toEqual([]);
    expect(await ledgerBids()).toEqual(['w-good']);

    const listed = (await main(['list', '--source', 'track-spend'], region.clientEnv)) as {
      reasonCode: string;
      reason: string;
      partitionKey: string;
      bytes: number;
      dataRef?: string;
      data?: string;
      sequenceNumber: string;
    }[];
    expect(listed.map((l) => l.reasonCode).sort()).toEqual([
      'kpl.bad-partition-key-index',
      'kpl.bad-partition-key-index',
      'spend.invalid-field',
    ]);
    const big = listed.find((l) => l.reasonCode === 'spend.invalid-field')!;
    expect(big.bytes).toBe(huge.length);
    expect(big.dataRef).toMatch(/^s3:\/\/paceline-dead-letter-payloads\/track-spend\//);
    expect(big.reason.length).toBeLessThan(500);
    for (const l of listed.filter((x) => x.reasonCode.startsWith('kpl.'))) {
      expect(l.partitionKey).toBe('c-q');
      expect(l.reason).toMatch(/partition-key index/);
    }

    const result = await main(['replay', '--source', 'track-spend'], region.clientEnv);
    expect(result).toEqual({ replayed: 3, failed: [] });
    expect(await main(['list', '--source', 'track-spend'], region.clientEnv)).toEqual([]);
    const [, key] = /^s3:\/\/[^/]+\/(.+)$/.exec(big.dataRef ?? '') ?? [];
    await expect(
      region.s3.send(new HeadObjectCommand({ Bucket: 'paceline-dead-letter-payloads', Key: key })),
    ).rejects.toThrow();

    // The replayed bytes are on the stream; processing them books the valid win.
    const shards =
      (await region.kinesis.send(new ListShardsCommand({ StreamName: region.streamName('spend') }))).Shards ??
      [];
    const replayed = [];
    for (const shard of shards) {
      const it = await region.kinesis.send(
        new GetShardIteratorCommand({
          StreamName: region.streamName('spend'),
          ShardId: shard.ShardId,
          ShardIteratorType: 'TRIM_HORIZON',
        }),
      );
      const page = await region.kinesis.send(new GetRecordsCommand({ ShardIterator: it.ShardIterator }));
      for (const r of page.Records ?? []) replayed.push(Buffer.from(r.Data ?? []));
    }
    expect(replayed.some((d) => d.equals(huge))).toBe(true);
    expect(
      replayed.some(
        (d) => d.equals(encodeSpendEvent(win('w-bad-index'))) || d.toString().includes('w-bad-index'),
      ),
    ).toBe(true);
    await handler(
      {
        Records: replayed.map((d) =>
          testKinesisRecord(d, { functionName: 'track-spend', partitionKey: 'c-q' }),
        ),
      },
      context,
    );
    expect(await ledgerBids()).toEqual(['w-bad-index', 'w-good']);
  });
});
