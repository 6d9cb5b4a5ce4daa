/**
 * End to end as `npm start` runs it, on a real 3-node Redis cluster: the producer puts events
 * (and one poison record) on the local region's actions stream, the runtime's event-source
 * mapping invokes ingest-actions in its own OS process (the real handler module, env from the
 * region description), and the query API in this process sees exactly the distinct events while
 * the poison record waits in the dead-letter table with its reason.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RegionRuntime, startRuntime } from '../../../local/runtime.js';
import { decodeRecord } from '../../../shared/counting/event-decode.js';
import { encodeActionEvent } from '../../../shared/counting/event-encode.js';
import { actionEventSchema } from '../../../shared/counting/schema.js';
import { ActionStore } from '../../../shared/counting/store.js';
import { KinesisProducer } from '../../../shared/kinesis/producer.js';
import { DeadLetterStore } from '../../../shared/quarantine/dead-letter-store.js';
import { connectRedis, type RedisClient, redisConfigFromEnv } from '../../../shared/redis/connect.js';
import { DAY_MS, HOUR_MS, systemClock } from '../../../shared/time/clock.js';

let runtime: RegionRuntime;
let redis: RedisClient;
const stateDir = mkdtempSync(join(tmpdir(), 'paceline-counting-'));

beforeAll(async () => {
  [runtime] = (await startRuntime({
    regions: ['us-east-1'],
    redisMode: 'cluster',
    stateDir,
    // Only what this test exercises: no pacer instances competing for the CPU.
    functions: ['ingestActions'],
  })) as [RegionRuntime];
  redis = connectRedis(redisConfigFromEnv(runtime.region.functionEnv('ingestActions')));
}, 120_000);

afterAll(async () => {
  redis?.disconnect();
  await runtime?.stop();
  rmSync(stateDir, { recursive: true, force: true });
});

describe('ingest-actions under the local runtime (process instances, 3-node cluster)', () => {
  it('counts the stream and quarantines the poison record', async () => {
    const now = Date.now();
    const users = Array.from({ length: 40 }, (_, u) => String(5_000 + u));
    const events = users.flatMap((userId, u) =>
      Array.from({ length: 10 }, (_, i) =>
        encodeActionEvent({
          userId,
          timestamp: now - i * HOUR_MS,
          insertionId: Buffer.alloc(16, i + 1).fill(u + 1, 0, 1),
          action: i % 3 === 0 ? 'click' : 'impression',
          ad: 100 + (i % 4),
          adGroup: 10,
          campaign: 2,
          advertiser: 1,
        }),
      ),
    );
    const producer = new KinesisProducer({
      client: runtime.region.kinesis,
      streamName: runtime.region.streamName('actions'),
    });
    // Every event twice (double logging), plus a record with a zero campaign id.
    const poison = Buffer.from(events[0] as Buffer);
    const campaign = actionEventSchema.current.byName.get('campaign');
    poison.fill(0, campaign?.offset, (campaign?.offset ?? 0) + 8);
    await producer.putAll([
      ...[...events, ...events].map((data) => ({ data, partitionKey: decodeRecord(data).userId })),
      { data: poison, partitionKey: 'poison' },
    ]);
    const poller = runtime.pollers.get('ingestActions');
    await poller?.waitForIdle(90_000);

    const store = new ActionStore({ redis, clock: systemClock });
    for (const userId of users) {
      const result = await store.count(userId, [{ ranges: [{ from: now - DAY_MS, to: now + 1 }] }]);
      expect(result[0]?.[0]?.total, userId).toBe(10);
      const text = await store.countText(
        `SELECT COUNT(*) FROM actions WHERE user = ${userId} AND action = 'click'`,
      );
      expect(text.total).toBe(4);
    }
    const letters = await new DeadLetterStore({
      client: runtime.region.dynamodb,
      tableName: runtime.region.tableName('deadLetters'),
    }).list('ingest-actions');
    expect(letters.map((l) => [l.partitionKey, l.reasonCode])).toEqual([
      ['poison', 'counting.invalid-field'],
    ]);
    expect(letters[0]?.reason).toMatch(/field "campaign"/);
    expect(runtime.onFailure.get('ingestActions')).toBeDefined();
  }, 120_000);
});
