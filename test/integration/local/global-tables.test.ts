/**
 * The global-tables stand-in between two local regions (real dynalite behind each proxy, real SDK
 * clients): asynchronous delivery after the configured lag, whole-item images (UpdateItem and
 * BatchWriteItem included), deletes, last-writer-wins on concurrent writes (both replicas converge
 * to the later write) even when the older image arrives while the newer local write is still in
 * flight, conditions evaluated on the local replica only, a replication pause, and non-global
 * tables left alone.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  BatchWriteItemCommand,
  ConditionalCheckFailedException,
  DeleteItemCommand,
  type DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GlobalTablesStandIn } from '../../../local/global-tables.js';
import { type LocalRegion, startLocalRegion } from '../../../local/region.js';
import { dynamoDbClient } from '../../../shared/aws/clients.js';
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
async function get(r: LocalRegion | DynamoDBClient, table: string, pk: string) {
  const client = 'dynamodb' in r ? r.dynamodb : r;
  return (await client.send(new GetItemCommand({ TableName: table, Key: key(pk), ConsistentRead: true })))
    .Item;
}

/**
 * An HTTP proxy in front of a dynalite that forwards every request at once but holds the answer to
 * a request whose body contains `HOLD` until `release()`: the write is applied, its writer (the
 * stand-in's proxy) has not heard back yet.
 */
async function holdingProxy(targetUrl: string) {
  const target = new URL(targetUrl);
  let release!: () => void;
  const released = new Promise<void>((r) => {
    release = r;
  });
  let reached!: () => void;
  const held = new Promise<void>((r) => {
    reached = r;
  });
  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks);
    const hold = body.includes('HOLD');
    const up = http.request({
      host: target.hostname,
      port: target.port,
      method: req.method,
      path: req.url,
      headers: { ...req.headers, host: target.host },
    });
    up.on('response', (answer) => {
      const out: Buffer[] = [];
      answer.on('data', (c: Buffer) => out.push(c));
      answer.on('end', async () => {
        if (hold) {
          reached();
          await released;
        }
        res.writeHead(answer.statusCode ?? 500, answer.headers);
        res.end(Buffer.concat(out));
      });
    });
    up.end(body);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    held,
    release,
    stop: () => {
      server.closeAllConnections();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
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

  it('keeps a newer local write when an older image arrives while that write is still in flight', async () => {
    const link2 = new GlobalTablesStandIn({ clock, lagMs: LAG });
    const hold = await holdingProxy(a.dynamoEmulator.url);
    const clientA = dynamoDbClient({
      region: 'us-east-1',
      dynamodb: await link2.attach('us-east-1', hold.url),
    });
    const clientB = dynamoDbClient({
      region: 'us-west-2',
      dynamodb: await link2.attach('us-west-2', b.dynamoEmulator.url),
    });
    try {
      const table = a.tableName('regionSpend');
      await clientB.send(
        new PutItemCommand({ TableName: table, Item: { ...key('race'), w: { S: 'B-older' } } }),
      );
      await settle();
      clock.advance(10);
      // A's write is applied in A's replica; its answer (and so its read-back and stamp) waits.
      const newer = { S: 'A-newer-HOLD' };
      const aWrite = clientA.send(
        new PutItemCommand({ TableName: table, Item: { ...key('race'), w: newer } }),
      );
      await hold.held;
      clock.advance(LAG);
      // B's older image is due in A now, while A's newer write is in flight.
      const delivering = link2.deliverDue();
      await settle();
      hold.release();
      await aWrite;
      await delivering;
      await settle();
      clock.advance(LAG);
      await link2.deliverDue();
      expect((await get(clientA, table, 'race'))?.w).toEqual(newer);
      expect((await get(clientB, table, 'race'))?.w).toEqual(newer);
    } finally {
      hold.release();
      await link2.stop();
      await hold.stop();
      clientA.destroy();
      clientB.destroy();
    }
  });

  it('evaluates conditions on the local replica only and applies replicated images unconditionally', async () => {
    const table = a.tableName('spendLedger');
    const put = (r: LocalRegion, w: string) =>
      r.dynamodb.send(
        new PutItemCommand({
          TableName: table,
          Item: { ...key('cond'), w: { S: w } },
          ConditionExpression: 'attribute_not_exists(pk)',
        }),
      );
    await put(a, 'A');
    clock.advance(10);
    // Within the lag B's replica has no item: B's condition holds there, as in AWS.
    await put(b, 'B');
    await settle();
    clock.advance(LAG);
    await link.deliverDue();
    // Both replicas converge to the later write; the image that replaced A's item did not fail
    // A's attribute_not_exists.
    expect((await get(a, table, 'cond'))?.w).toEqual({ S: 'B' });
    expect((await get(b, table, 'cond'))?.w).toEqual({ S: 'B' });
    // Once replicated, the item is there in both: a third conditional put fails locally.
    await expect(put(a, 'again')).rejects.toBeInstanceOf(ConditionalCheckFailedException);
  });
});
