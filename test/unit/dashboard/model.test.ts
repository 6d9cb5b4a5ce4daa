/** The dashboard's data model: campaign readings from real contract hashes, the bounded history. */
import { describe, expect, it } from 'vitest';
import {
  type CampaignRef,
  campaignReading,
  RegionHistory,
  type RegionSample,
  samplePoints,
  spendDay,
  topCampaigns,
} from '../../../local/dashboard/model.js';
import { encodeCurve, encodePlanParams } from '../../../shared/pacing/codec.js';
import type { PlanPacingParams } from '../../../shared/pacing/types.js';

// 2026-11-21 in UTC.
const DAY = { day: '2026-11-21', startMs: Date.UTC(2026, 10, 21), endMs: Date.UTC(2026, 10, 22) };
const NOON = DAY.startMs + 12 * 3_600_000;
const ref: CampaignRef = { accountId: 'a1', campaignId: 'c1', budgetMicros: 100_000_000, timeZone: 'UTC' };
const params: PlanPacingParams = {
  planId: 'campaign',
  day: DAY.day,
  budgetMicros: 96_000_000,
  mode: 'even',
  throttle: 0.5,
  bidMultiplier: 0.9,
  curve: { atMs: [DAY.startMs, DAY.endMs], micros: [0, 96_000_000] },
};

/** A campaign hash exactly as the publisher writes it (contract v2). */
function published(p: PlanPacingParams = params, at = NOON - 4_000): Record<string, string> {
  return {
    v: '2',
    t: String(Math.floor(at / 10_000)),
    at: String(at),
    f: '1.0.1',
    by: 's0-i0/1-ab',
    plans: p.planId,
    [`p:${p.planId}`]: encodePlanParams(p, DAY),
    [`e:${p.planId}`]: encodeCurve(p.curve),
  };
}

/** A live spend hash (fields of shared/spend/keys.ts): slot 60 s, T 10 min. */
function spend(confirmed: number, inFlight: Record<string, number> = {}): Record<string, string> {
  const out: Record<string, string> = { r: 'e1', q: '60000', t: '600000', c: String(confirmed) };
  for (const [k, v] of Object.entries(inFlight)) out[`f:${k}`] = String(v);
  return out;
}

describe('topCampaigns', () => {
  it('keeps the n largest budgets, ties by id, stable whatever the input order', () => {
    const refs = [
      { ...ref, campaignId: 'b', budgetMicros: 5 },
      { ...ref, campaignId: 'a', budgetMicros: 5 },
      { ...ref, campaignId: 'z', budgetMicros: 9 },
      { ...ref, campaignId: 'y', budgetMicros: 1 },
    ];
    expect(topCampaigns(refs, 3).map((r) => r.campaignId)).toEqual(['z', 'a', 'b']);
    expect(topCampaigns([...refs].reverse(), 3).map((r) => r.campaignId)).toEqual(['z', 'a', 'b']);
    expect(topCampaigns(refs, 0)).toEqual([]);
  });
});

describe('campaignReading', () => {
  it('puts live confirmed spend beside E(now) of the published campaign plan', () => {
    const slot = Math.floor(NOON / 60_000);
    const r = campaignReading(ref, published(), spend(40_000_000, { [slot]: 3_000 }), NOON);
    expect(r).toMatchObject({
      day: DAY.day,
      // the plan's budget beside this region's published share of it (labelled apart)
      budgetMicros: 100_000_000,
      shareMicros: 96_000_000,
      allocationMicros: null,
      authority: null,
      spentMicros: 40_000_000,
      inFlightMicros: 3_000,
      targetMicros: 48_000_000, // half the day of a linear 96 M curve
      throttle: 0.5,
      bidMultiplier: 0.9,
      publishedAgeMs: 4_000,
      publish: 'published',
      // 40.003 M of 48 M expected: behind, while the pacer is still raising the pressure
      delivery: { band: 'behind', reason: 'catching-up' },
    });
    expect(r.delivery.ratio).toBeCloseTo(40_003_000 / 48_000_000, 6);
  });

  it('with several regions: the allocation from the spend hash and the plan’s authority', () => {
    const hash = { ...spend(1_000), a: '30000000', ae: String(NOON + 60_000) };
    const r = campaignReading(ref, published(), hash, NOON, undefined, ['us-east-1', 'us-west-2']);
    expect(r).toMatchObject({
      allocationMicros: 30_000_000,
      allocationUntilMs: NOON + 60_000,
      authority: { home: 'us-east-1', fence: 0 },
    });
    const moved = campaignReading(
      { ...ref, allocHome: 'us-west-2', allocFence: 1 },
      published(),
      hash,
      NOON,
      undefined,
      ['us-east-1', 'us-west-2'],
    );
    expect(moved.authority).toEqual({ home: 'us-west-2', fence: 1 });
  });

  it('ages a hash by its shard’s last completed publish (contract v2), not its last write', () => {
    // Written 40 s ago, within rp of the shard's publish 2 s ago: as fresh as that publish.
    const claim = { pt: String(Math.floor((NOON - 2_000) / 10_000)), pat: String(NOON - 2_000), rp: '70000' };
    const r = campaignReading(ref, published(params, NOON - 40_000), spend(0), NOON, claim);
    expect(r.publishedAgeMs).toBe(2_000);
    // Left behind (not rewritten for longer than rp): ages from its write + rp.
    const old = campaignReading(ref, published(params, NOON - 100_000), spend(0), NOON, claim);
    expect(old.publishedAgeMs).toBe(30_000);
  });

  it('shows gaps, not zeros, for what is not there: no publish, counters not initialised', () => {
    const r = campaignReading(ref, {}, {}, NOON);
    expect(r).toMatchObject({
      spentMicros: null,
      targetMicros: null,
      throttle: null,
      bidMultiplier: null,
      publishedAgeMs: null,
      publish: 'missing',
      budgetMicros: 100_000_000,
      day: DAY.day,
    });
    // A hash without the reset sentinel is not initialised, whatever it holds.
    expect(campaignReading(ref, {}, { c: '5', q: '60000', t: '600000' }, NOON).spentMicros).toBeNull();
  });

  it('reports a malformed publish with its reason instead of throwing', () => {
    const bad = { ...published(), 'p:campaign': 'x,y' };
    const r = campaignReading(ref, bad, spend(1), NOON);
    expect(r.publish).toBe('malformed');
    expect(r.error).toMatch(/p: field has 2 parts/);
    expect(r.targetMicros).toBeNull();
    expect(r.spentMicros).toBe(1);
  });

  it('ignores parameters of a day that has ended: the new day has no target until published', () => {
    const tomorrow = DAY.endMs + 60_000;
    expect(spendDay(ref, undefined, tomorrow)).toBe('2026-11-22');
    const r = campaignReading(ref, published(), spend(0), tomorrow);
    expect(r.day).toBe('2026-11-22');
    expect(r.targetMicros).toBeNull();
    expect(r.throttle).toBeNull();
  });

  it('takes the budget day from the account time zone before anything is published', () => {
    const tokyo = { ...ref, timeZone: 'Asia/Tokyo' };
    // 20:00 UTC on the 21st is 05:00 on the 22nd in Tokyo.
    expect(spendDay(tokyo, undefined, DAY.startMs + 20 * 3_600_000)).toBe('2026-11-22');
  });

  it('charts the campaign plan when account and arm plans are published beside it', () => {
    const hash = {
      ...published({ ...params, planId: 'arm:A', throttle: 0.1 }),
      ...published(params),
      plans: 'account,arm:A,campaign',
      'p:account': encodePlanParams({ ...params, planId: 'account', throttle: 0.2 }, DAY),
      'e:account': encodeCurve(params.curve),
    };
    expect(campaignReading(ref, hash, spend(0), NOON).throttle).toBe(0.5);
  });
});

function sample(atMs: number, spent: number | null, extra: Partial<RegionSample> = {}): RegionSample {
  return {
    region: 'r1',
    atMs,
    campaigns: [
      {
        campaignId: 'c1',
        accountId: 'a1',
        budgetMicros: 1,
        shareMicros: 1,
        allocationMicros: null,
        allocationUntilMs: null,
        authority: null,
        day: DAY.day,
        spentMicros: spent,
        inFlightMicros: 0,
        targetMicros: 10,
        throttle: 1,
        bidMultiplier: 1,
        publishedAgeMs: 0,
        publish: 'published',
        delivery: { ratio: null, band: 'on-pace', reason: null },
      },
    ],
    shards: [
      {
        shard: 0,
        leader: 's0-i0',
        epoch: 1,
        lastTick: 1,
        ageMs: 1_500,
        override: 'auto',
        publisher: 'r1/s0-i0/p',
        publishingRegion: 'r1',
      },
    ],
    publishSwitch: { region: 'r1', publisherRegion: 'r1', version: 1, sinceMs: 0 },
    deadLetters: { 'track-spend': 2 },
    errors: [],
    ...extra,
  };
}

describe('samplePoints', () => {
  it('names one point per series and leaves out missing values', () => {
    expect(Object.fromEntries(samplePoints(sample(1, 7)))).toEqual({
      'spent/c1': 7,
      'target/c1': 10,
      'throttle/c1': 1,
      'multiplier/c1': 1,
      'age/0': 1_500,
      'deadLetters/track-spend': 2,
    });
    expect(samplePoints(sample(1, null)).has('spent/c1')).toBe(false);
  });
});

describe('RegionHistory', () => {
  it('keeps at most maxPoints per series, oldest dropped, and the latest sample', () => {
    const h = new RegionHistory('r1', { maxPoints: 3 });
    for (let t = 1; t <= 5; t++) h.add(sample(t * 1000, t));
    expect(h.points('spent/c1')).toEqual([
      [3000, 3],
      [4000, 4],
      [5000, 5],
    ]);
    expect(h.latest?.atMs).toBe(5000);
    expect(h.points('unknown/x')).toEqual([]);
  });

  it('ignores a sample not newer than a series’ last point (no zig-zag in time)', () => {
    const h = new RegionHistory('r1');
    h.add(sample(2000, 2));
    h.add(sample(1000, 1));
    h.add(sample(2000, 9));
    expect(h.points('spent/c1')).toEqual([[2000, 2]]);
  });

  it('bounds the number of series, dropping the least recently updated', () => {
    const h = new RegionHistory('r1', { maxSeries: 7 });
    h.add(sample(1000, 1)); // 6 series, dead letters of track-spend among them
    h.add(sample(2000, 1, { deadLetters: { 'ingest-actions': 1 } })); // 5 updated + 1 new: 7
    h.add(sample(3000, 1, { deadLetters: { other: 1 } })); // 8: track-spend (last seen at 1000) goes
    const names = Object.keys(h.toJSON().series);
    expect(names).toHaveLength(7);
    expect(names).toContain('deadLetters/other');
    expect(names).toContain('deadLetters/ingest-actions');
    expect(names).not.toContain('deadLetters/track-spend');
    expect(h.points('spent/c1')).toHaveLength(3);
  });
});
