/**
 * The ingest function coalesces the records the batch handler hands over one at a time into one
 * store write (shared/counting/ingest.ts IngestCoalescer): on a real redis-server, concurrent
 * ingests become one script call (counted by the server's own command statistics), malformed
 * records are refused alone while the rest are stored, the write's outcome is counted once per
 * metrics object, and a write Redis refuses rejects every record that joined it (none stored
 * as if it had succeeded).
 */
import { describe, expect, it } from 'vitest';
import { countIngest, IngestCoalescer } from '../../../shared/counting/ingest.js';
import { ActionEventError } from '../../../shared/counting/schema.js';
import { ActionStore } from '../../../shared/counting/store.js';
import { DAY_MS, HOUR_MS, ManualClock } from '../../../shared/time/clock.js';
import { useRedis } from '../../support/redis.js';
import { impressionWire } from './fixtures.js';

const now = Date.UTC(2026, 10, 25, 12);

const wire = (userId: number, insertion: number, timestamp = now - HOUR_MS): Buffer =>
  impressionWire(userId, insertion, timestamp);

class Sums {
  readonly sums = new Map<string, number>();
  calls = 0;
  count(name: string, value: number): void {
    this.calls++;
    this.sums.set(name, (this.sums.get(name) ?? 0) + value);
  }
}

describe('IngestCoalescer on a real redis-server', () => {
  const r = useRedis('standalone');
  const store = (prefix: string) =>
    new ActionStore({ redis: r.redis, clock: new ManualClock(now), keyPrefix: prefix });

  /** Script calls the server has executed so far (EVALSHA + EVAL). */
  async function scriptCalls(): Promise<number> {
    const info = await r.redis.info('commandstats');
    let calls = 0;
    for (const m of info.matchAll(/cmdstat_(?:evalsha|eval):calls=(\d+)/g)) calls += Number(m[1]);
    return calls;
  }

  it('turns 200 concurrent single-record ingests into one script call, counting the outcome once', async () => {
    const s = store('co1');
    const ingest = new IngestCoalescer({ store: s });
    // Warm the script cache (the first EVALSHA of a client may fall back to EVAL).
    await ingest.ingest(wire(1, 1));
    const metrics = new Sums();
    const before = await scriptCalls();
    // 150 users, 50 of the records copies of earlier ones (duplicates).
    const records = Array.from({ length: 200 }, (_, i) => wire(100 + (i % 150), i % 150));
    await Promise.all(records.map((data) => ingest.ingest(data, metrics)));
    expect((await scriptCalls()) - before).toBe(1);
    expect(metrics.sums.get('ActionsCounted')).toBe(150);
    expect(metrics.sums.get('ActionsDuplicate')).toBe(50);
    // One countIngest for the one write (6 metric names), not one per record.
    expect(metrics.calls).toBe(6);
    const counts = await s.count('120', [{ ranges: [{ from: now - DAY_MS, to: now + 1 }] }]);
    expect(counts[0]?.[0]?.total).toBe(1);
  });

  it('refuses a malformed record alone; the others of the same turn are stored', async () => {
    const s = store('co2');
    const ingest = new IngestCoalescer({ store: s });
    const bad = Buffer.from(wire(7, 7));
    bad.writeUInt8(0xff, 0); // unknown schema version
    const future = wire(8, 8, now + 2 * HOUR_MS); // beyond the allowed clock skew
    const outcomes = await Promise.allSettled([
      ingest.ingest(wire(5, 5)),
      ingest.ingest(bad),
      ingest.ingest(future),
      ingest.ingest(wire(6, 6)),
    ]);
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'rejected', 'fulfilled']);
    for (const o of outcomes.filter((x) => x.status === 'rejected')) {
      expect((o as PromiseRejectedResult).reason).toBeInstanceOf(ActionEventError);
    }
    for (const user of ['5', '6']) {
      const counts = await s.count(user, [{ ranges: [{ from: now - DAY_MS, to: now + 1 }] }]);
      expect(counts[0]?.[0]?.total).toBe(1);
    }
  });

  it('rejects every record of a write Redis refuses, and stores them when retried', async () => {
    const s = store('co3');
    const ingest = new IngestCoalescer({ store: s });
    await ingest.ingest(wire(1, 1)); // script loaded
    await r.redis.config('SET', 'maxmemory-policy', 'noeviction');
    await r.redis.config('SET', 'maxmemory', '1');
    let outcomes: PromiseSettledResult<void>[];
    try {
      outcomes = await Promise.allSettled([10, 11, 12].map((u) => ingest.ingest(wire(u, u))));
    } finally {
      await r.redis.config('SET', 'maxmemory', '0');
    }
    expect(outcomes.map((o) => o.status)).toEqual(['rejected', 'rejected', 'rejected']);
    expect(String((outcomes[0] as PromiseRejectedResult).reason)).toMatch(/OOM/);
    // The batch handler reports them; Kinesis redelivers: the retry stores each once.
    const metrics = new Sums();
    await Promise.all([10, 11, 12].map((u) => ingest.ingest(wire(u, u), metrics)));
    expect(metrics.sums.get('ActionsCounted')).toBe(3);
  });

  it('flushes early at maxPending and refuses a bad maxPending with what to give', async () => {
    expect(() => new IngestCoalescer({ store: store('co4'), maxPending: 0 })).toThrow(/positive integer/);
    const s = store('co5');
    const ingest = new IngestCoalescer({ store: s, maxPending: 10 });
    await ingest.ingest(wire(1, 1));
    const before = await scriptCalls();
    await Promise.all(Array.from({ length: 25 }, (_, i) => ingest.ingest(wire(200 + i, i))));
    expect((await scriptCalls()) - before).toBe(3);
  });

  it('countIngest names every outcome field', () => {
    const m = new Sums();
    countIngest(m, { added: 1, duplicates: 2, restamped: 3, expired: 4, repaired: 5, migrated: 6 });
    expect([...m.sums.values()]).toEqual([1, 2, 3, 4, 5, 6]);
  });
});
