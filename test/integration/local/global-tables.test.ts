/**
 * The global-tables stand-in between two local regions (real dynalite behind each proxy, real SDK
 * clients): asynchronous delivery after the configured lag, whole-item images (UpdateItem and
 * BatchWriteItem included), deletes, last-writer-wins on concurrent writes (both replicas converge
 * to the later write), a replication pause, and non-global tables left alone.
 */
import {
  BatchWriteItemCommand,
  DeleteItemCommand,
  GetItemCommand,
  PutItemCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GlobalTablesStandIn } from '../../../local/global-tables.js';
import { type LocalRegion, startLocalRegion } from '../../../local/region.js';
import { ManualClock } from '../../../shared/time/clock.js';

const clock = new ManualClock(1_000_000);
const LAG = 1_500;
let link: GlobalTablesStandIn;
let a: LocalRegion;
let b: LocalRegion;

beforeAll(async () => {
  link = new GlobalTablesStandIn({ clock, lagMs: LAG });
  [a, b] = await Promise.all([
    startLocalRegion({ region: 'us-east-1', globalTables: link }),
    startLocalRegion({ region: 'us-west-2', globalTables: link }),
  ]);
}, 60_000);

afterAll(async () => {
  await link?.stop();
  await Promise.all([a?.stop(), b?.stop()]);
});

const key = (pk: string) => ({ pk: { S: pk }, sk: { S: 'x' } });
async function get(r: LocalRegion, table: string, pk: string) {
  return (await r.dynamodb.send(new GetItemCommand({ TableName: table, Key: key(pk), ConsistentRead: true })))
    .Item;
}
/** Lets the proxy capture the write's image (it reads the item back after answering). */
const settle = () => new Promise((r) => setTimeout(r, 100));

describe('global tables stand-in', () => {
  it('delivers a write to the other region only after the lag, as the whole item', async () => {
    const table = a.tableName('regionSpend');
    await a.dynamodb.send(new PutItemCommand({ TableName: table, Item: { ...key('p1'), n: { N: '1' } } }));
    await a.dynamodb.send(
      new UpdateItemCommand({
        TableName: table,
        Key: key('p1'),
        UpdateExpression: 'SET m = :m',
        ExpressionAttributeValues: { ':m': { S: 'two' } },
      }),
    );
    await settle();
    await link.deliverDue();
    expect(await get(b, table, 'p1')).toBeUndefined();
    clock.advance(LAG);
    await link.deliverDue();
    expect(await get(b, table, 'p1')).toEqual({ ...key('p1'), n: { N: '1' }, m: { S: 'two' } });
  });

  it('replicates BatchWriteItem puts and deletes', async () => {
    const table = a.tableName('budgets');
    await b.dynamodb.send(
      new BatchWriteItemCommand({
        RequestItems: {
          [table]: [
            { PutRequest: { Item: { ...key('bw1'), v: { N: '7' } } } },
            { PutRequest: { Item: key('bw2') } },
          ],
        },
      }),
    );
    await settle();
    clock.advance(LAG);
    await link.deliverDue();
    expect((await get(a, table, 'bw1'))?.v).toEqual({ N: '7' });
    await b.dynamodb.send(new DeleteItemCommand({ TableName: table, Key: key('bw1') }));
    await settle();
    clock.advance(LAG);
    await link.deliverDue();
    expect(await get(a, table, 'bw1')).toBeUndefined();
    expect(await get(a, table, 'bw2')).toBeDefined();
  });

  it('resolves concurrent writes by last writer wins: both replicas converge to the later write', async () => {
    const table = a.tableName('regionSpend');
    await a.dynamodb.send(new PutItemCommand({ TableName: table, Item: { ...key('c'), w: { S: 'A' } } }));
    clock.advance(10);
    await b.dynamodb.send(new PutItemCommand({ TableName: table, Item: { ...key('c'), w: { S: 'B' } } }));
    await settle();
    // Before replication each region reads its own write.
    expect((await get(a, table, 'c'))?.w).toEqual({ S: 'A' });
    clock.advance(LAG);
    await link.deliverDue();
    expect((await get(a, table, 'c'))?.w).toEqual({ S: 'B' });
    expect((await get(b, table, 'c'))?.w).toEqual({ S: 'B' });
    expect(link.stats.superseded).toBeGreaterThanOrEqual(1);
  });

  it('holds images while paused and delivers them in order on resume; leaves regional tables alone', async () => {
    const table = a.tableName('regionSpend');
    link.pause();
    for (const n of ['1', '2', '3']) {
      await a.dynamodb.send(new PutItemCommand({ TableName: table, Item: { ...key('ord'), n: { N: n } } }));
      clock.advance(1);
    }
    await a.dynamodb.send(new PutItemCommand({ TableName: a.tableName('leases'), Item: key('local-only') }));
    await settle();
    clock.advance(LAG * 10);
    await link.deliverDue();
    expect(await get(b, table, 'ord')).toBeUndefined();
    expect(link.pending).toBeGreaterThanOrEqual(1);
    link.resume();
    await link.deliverDue();
    expect((await get(b, table, 'ord'))?.n).toEqual({ N: '3' });
    expect(await get(b, a.tableName('leases'), 'local-only')).toBeUndefined();
  });
});
