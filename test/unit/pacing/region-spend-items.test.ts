/**
 * The `region-spend` items (shared/pacing/regions/region-spend-items.ts): parts by plan hash stay
 * under the target size whatever the number of plans (measured bytes per plan-day), a view takes
 * each key from its newest part, malformed entries are skipped, one region with one part writes
 * the item it always wrote; the in-memory store refuses an older tick and a lower epoch; the
 * share rule's optimistic start (strict allocations only).
 */
import { describe, expect, it } from 'vitest';
import {
  ownerOfSk,
  PART_TARGET_BYTES,
  parseAuthorityItem,
  parseRegionItem,
  partOf,
  partSk,
  splitParts,
  viewOf,
} from '../../../shared/pacing/regions/region-spend-items.js';
import { MemoryRegionSpendStore } from '../../../shared/pacing/regions/region-spend-store.js';
import { regionShare } from '../../../shared/pacing/regions/shares.js';

/** A realistic plan-day key and its summary + mailbox JSON (the largest an entry gets). */
function entryJson(i: number): [string, number] {
  const key = `c:campaign-${i.toString(36).padStart(10, '0')}:arm:variant-${i % 7}|2026-11-26`;
  const summary = `${JSON.stringify(key)}:[123456789012,98765.432]`;
  const mailbox = `${JSON.stringify(key)}:[123456789012,123456789012,123456789012,123456789012,1764115200000,3,"ap-southeast-2"]`;
  return [key, summary.length + mailbox.length];
}

describe('region-spend items', () => {
  it('splits a shard of many plans into parts under the target size (bytes measured per plan-day)', () => {
    const entries = Array.from({ length: 20_000 }, (_, i) => entryJson(i));
    const perPlanDay = entries.reduce((s, [, b]) => s + b, 0) / entries.length;
    // A plan-day of the region item weighs ~200 bytes at most (summary + mailbox).
    expect(perPlanDay).toBeLessThan(210);
    const parts = splitParts(entries);
    expect(parts.length).toBe(16);
    for (const part of parts) {
      const bytes = part.reduce((s, i) => s + (entries[i] as [string, number])[1] + 1, 0);
      expect(bytes).toBeLessThanOrEqual(PART_TARGET_BYTES);
    }
    expect(parts.flat().sort((a, b) => a - b)).toEqual(entries.map((_, i) => i));
    // every entry is in the part its key hashes to
    for (const [p, part] of parts.entries())
      for (const i of part) expect(partOf((entries[i] as [string, number])[0], 16)).toBe(p);
    // one part: the item keeps the sk it always had
    expect(splitParts(entries.slice(0, 10)).length).toBe(1);
    expect(partSk('us-east-1', 0, 1)).toBe('us-east-1');
    expect(partSk('us-east-1', 3, 4)).toBe('us-east-1#3');
  });

  it('a view takes each key from the newest part; owners come from the sk', () => {
    expect(ownerOfSk('us-east-1#2')).toEqual({ kind: 'region', name: 'us-east-1' });
    expect(ownerOfSk('alloc#us-west-2#1')).toEqual({ kind: 'authority', name: 'us-west-2' });
    const view = viewOf([
      { pk: '4:1', sk: 'us-east-1', plans: '{"k1|d":[100,1],"k2|d":[5,0]}', tick: 10, atMs: 1_000 },
      // after growing to two parts, k1 moved to part 1 at a newer tick
      { pk: '4:1', sk: 'us-east-1#1', plans: '{"k1|d":[300,2]}', tick: 12, atMs: 3_000 },
      {
        pk: '4:1',
        sk: 'alloc#us-east-1',
        regions: ['us-east-1', 'us-west-2'],
        plans: '{"k1|d":[0,[10,20],[0,0],[0,0],[99,98],[0,0]]}',
        tick: 12,
        atMs: 3_000,
        epoch: 4,
      },
    ]);
    const east = view.regions.get('us-east-1');
    expect(east?.atMs).toBe(3_000);
    expect(east?.plans.get('k1|d')?.spentMicros).toBe(300);
    expect(east?.plans.get('k2|d')?.spentMicros).toBe(5);
    expect(view.authorities.get('us-east-1')?.plans.get('k1|d')).toEqual({
      fence: 0,
      g: { 'us-east-1': 10, 'us-west-2': 20 },
      x: { 'us-east-1': 0, 'us-west-2': 0 },
      rb: { 'us-east-1': 0, 'us-west-2': 0 },
      ack: { 'us-east-1': 99, 'us-west-2': 98 },
      rs: { 'us-east-1': 0, 'us-west-2': 0 },
      writtenAtMs: 3_000,
    });
    expect(view.authorities.get('us-east-1')?.epoch).toBe(4);
  });

  it('reads mailboxes and unmeasured demands; skips what it cannot read', () => {
    const plans = parseRegionItem({
      plans: '{"a|d":[10,2.5],"b|d":[7,0],"bad|d":[-1,0],"worse|d":"x"}',
      alloc: '{"a|d":[1,2,3,4,5,6,"us-east-1"],"b|d":[1,2]}',
      um: '["b|d"]',
      atMs: 42,
    });
    expect([...plans.keys()]).toEqual(['a|d', 'b|d']);
    expect(plans.get('a|d')).toEqual({
      spentMicros: 10,
      demandMicrosPerSec: 2.5,
      measured: true,
      mailbox: {
        spent: 10,
        rel: 1,
        want: 2,
        seenG: 3,
        seenX: 4,
        ae: 5,
        fence: 6,
        home: 'us-east-1',
        atMs: 42,
      },
    });
    expect(plans.get('b|d')).toEqual({ spentMicros: 7, demandMicrosPerSec: 0, measured: false });
    expect(parseRegionItem({ plans: 'not json' }).size).toBe(0);
    // an authority entry whose arrays do not match the region list is skipped
    expect(
      parseAuthorityItem({
        regions: ['a'],
        plans: '{"k":[0,[1,2],[0],[0],[0],[0]],"ok":[1,[1],[0],[0],[9],[0]]}',
      }).size,
    ).toBe(1);
  });

  it('the in-memory store refuses an older tick, and an authority write of a lower epoch', async () => {
    const store = new MemoryRegionSpendStore();
    expect(await store.put({ pk: 'p', sk: 's', tick: 5 })).toBe(true);
    expect(await store.put({ pk: 'p', sk: 's', tick: 5 })).toBe(false);
    expect(await store.put({ pk: 'p', sk: 'alloc#a', tick: 5, epoch: 3 }, { epoch: 3 })).toBe(true);
    expect(await store.put({ pk: 'p', sk: 'alloc#a', tick: 6, epoch: 2 }, { epoch: 2 })).toBe(false);
    expect(await store.put({ pk: 'p', sk: 'alloc#a', tick: 6, epoch: 3 }, { epoch: 3 })).toBe(true);
    expect((await store.query('p')).length).toBe(2);
  });
});

describe('share rule: optimistic start (strict allocations)', () => {
  it('aims at everything left while some demand is unmeasured, instead of an equal split', () => {
    const base = {
      budgetMicros: 520_000_000,
      dayLengthMs: 86_400_000,
      ownSpentMicros: 1_000_000,
      ownDemandMicrosPerSec: 0,
      peers: [{ region: 'b', spentMicros: 0, demandMicrosPerSec: 0 }],
    };
    expect(regionShare(base).shareMicros).toBe(1_000_000 + Math.floor(0.5 * 519_000_000));
    expect(regionShare({ ...base, optimistic: true }).shareMicros).toBe(520_000_000);
  });
});
