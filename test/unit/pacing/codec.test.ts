/** Contract v2 encodings: round trips, exact text, and refusal of malformed or unpublishable values. */
import { describe, expect, it } from 'vitest';
import {
  assertPublishable,
  decodeCampaignHash,
  decodeCurve,
  decodeShardPublish,
  effectivePublish,
  encodeCurve,
  encodePlanParams,
  InvalidPacingParamsError,
  PacingDecodeError,
} from '../../../shared/pacing/codec.js';
import { compareFence, formatFence, parseFence } from '../../../shared/pacing/fence.js';
import type { PlanPacingParams } from '../../../shared/pacing/types.js';
import { evaluateCurve } from '../../../shared/pacing/types.js';

const DAY = { day: '2026-11-21', startMs: 1795237200000, endMs: 1795323600000 };
const params: PlanPacingParams = {
  planId: 'campaign',
  day: DAY.day,
  budgetMicros: 1_000_000_000,
  mode: 'even',
  throttle: 0.8125,
  bidMultiplier: 0.95,
  curve: { atMs: [DAY.startMs, DAY.startMs + 3_600_000, DAY.endMs], micros: [0, 10_000_000, 1_000_000_000] },
};

describe('codec', () => {
  it('encodes parameters and curves as the documented plain text', () => {
    expect(encodePlanParams(params, DAY)).toBe(
      '0.8125,0.95,1000000000,even,2026-11-21,1795237200000,1795323600000',
    );
    expect(encodeCurve(params.curve)).toBe('1795237200000,0;3600000,10000000;82800000,990000000');
    expect(encodePlanParams({ ...params, throttle: 1 / 3 }, DAY).split(',')[0]).toBe('0.333333');
  });

  it('round-trips a campaign hash with every plan', () => {
    const hash = {
      v: '2',
      t: '179528040',
      at: '1795280402000',
      f: '1.2.3',
      by: 's7-i1/42-ab',
      plans: 'account,campaign',
      'p:account': encodePlanParams({ ...params, planId: 'account' }, DAY),
      'e:account': encodeCurve(params.curve),
      'p:campaign': encodePlanParams(params, DAY),
      'e:campaign': encodeCurve(params.curve),
    };
    const out = decodeCampaignHash(hash);
    expect(out?.fence).toEqual({ g: 1, o: 2, e: 3 });
    expect(out?.plans.get('campaign')).toMatchObject({
      throttle: 0.8125,
      bidMultiplier: 0.95,
      curve: params.curve,
      dayWindow: DAY,
    });
    expect(
      evaluateCurve(out?.plans.get('campaign')?.curve as PlanPacingParams['curve'], DAY.startMs + 1_800_000),
    ).toBe(5_000_000);
    expect(decodeCampaignHash({})).toBeUndefined();
  });

  it('refuses malformed hashes instead of guessing', () => {
    const good = {
      v: '2',
      t: '1',
      at: '1',
      f: '1.1.1',
      plans: 'campaign',
      'p:campaign': encodePlanParams(params, DAY),
      'e:campaign': encodeCurve(params.curve),
    };
    // v1 hashes (freshness in every hash) are refused: their `at` meant something else.
    expect(() => decodeCampaignHash({ ...good, v: '1' })).toThrow(/contract version 1 is not 2/);
    expect(() => decodeCampaignHash({ ...good, v: '3' })).toThrow(PacingDecodeError);
    expect(() => decodeCampaignHash({ ...good, f: 'x' })).toThrow(PacingDecodeError);
    expect(() => decodeCampaignHash({ ...good, 'p:campaign': '1.5,1,1,even,2026-11-21,1,2' })).toThrow(
      /malformed/,
    );
    expect(() => decodeCampaignHash({ ...good, 'p:campaign': '' })).toThrow(PacingDecodeError);
    expect(() => decodeCampaignHash({ ...good, 'e:campaign': undefined as unknown as string })).toThrow(
      /no e:/,
    );
    expect(decodeCurve('1,5;0,1')).toBeUndefined(); // instants must increase
    expect(decodeCurve('1,5;10,-1')).toBeUndefined(); // values must not decrease
    expect(decodeCurve('abc')).toBeUndefined();
  });

  it('takes freshness from the shard publish for hashes rewritten within rp, from their own at otherwise', () => {
    const campaign = decodeCampaignHash({
      v: '2',
      t: '100',
      at: '1000000',
      f: '1.1.1',
      plans: 'campaign',
      'p:campaign': encodePlanParams(params, DAY),
      'e:campaign': encodeCurve(params.curve),
    }) as NonNullable<ReturnType<typeof decodeCampaignHash>>;
    const shard = decodeShardPublish({ pt: '103', pat: '1030000', rp: '70000' });
    expect(shard).toEqual({ tick: 103, publishedAtMs: 1_030_000, republishMs: 70_000 });
    // Written 30 s before the shard's last publish, within rp: as fresh as that publish.
    expect(effectivePublish(campaign, shard)).toMatchObject({ publishedAtMs: 1_030_000, tick: 103 });
    // Not rewritten for longer than rp (no longer paced): ages from its own at + rp.
    const later = { tick: 120, publishedAtMs: 1_200_000, republishMs: 70_000 };
    expect(effectivePublish(campaign, later)).toMatchObject({ publishedAtMs: 1_070_000, tick: 100 });
    // A shard publish older than the hash (a publish in progress) never makes it older.
    expect(effectivePublish(campaign, { tick: 99, publishedAtMs: 990_000, republishMs: 70_000 })).toBe(
      campaign,
    );
    // No (or a malformed) shard publish: the hash's own at.
    expect(effectivePublish(campaign, undefined)).toBe(campaign);
    expect(decodeShardPublish({ pt: '103', pat: 'x', rp: '1' })).toBeUndefined();
    expect(decodeShardPublish({ pt: null, pat: null, rp: null })).toBeUndefined();
    expect(decodeShardPublish({ pt: '1', pat: '1', rp: '-5' })).toBeUndefined();
  });

  it('refuses to publish what a reader could not trust', () => {
    expect(() => assertPublishable(params)).not.toThrow();
    for (const bad of [
      { throttle: Number.NaN },
      { throttle: 1.01 },
      { bidMultiplier: 0 },
      { bidMultiplier: Number.POSITIVE_INFINITY },
      { budgetMicros: 1.5 },
      { day: '21/11/2026' },
      { curve: { atMs: [2, 1], micros: [0, 1] } },
      { curve: { atMs: [1, 2], micros: [5, 1] } },
      { curve: { atMs: [], micros: [] } },
    ]) {
      expect(() => assertPublishable({ ...params, ...bad } as PlanPacingParams)).toThrow(
        InvalidPacingParamsError,
      );
    }
  });
});

describe('fence', () => {
  it('compares (g, o, e) lexicographically and round-trips its text', () => {
    expect(compareFence({ g: 2, o: 0, e: 0 }, { g: 1, o: 9, e: 9 })).toBeGreaterThan(0);
    expect(compareFence({ g: 1, o: 2, e: 0 }, { g: 1, o: 1, e: 99 })).toBeGreaterThan(0);
    expect(compareFence({ g: 1, o: 1, e: 3 }, { g: 1, o: 1, e: 4 })).toBeLessThan(0);
    expect(compareFence({ g: 1, o: 1, e: 3 }, { g: 1, o: 1, e: 3 })).toBe(0);
    expect(parseFence(formatFence({ g: 4, o: 5, e: 6 }))).toEqual({ g: 4, o: 5, e: 6 });
    expect(parseFence('1.2')).toBeUndefined();
    expect(parseFence(undefined)).toBeUndefined();
  });
});
