/**
 * Pod filling (shared/counting/pods.ts): competitive separation, no repeated creative, slots
 * already served, and malformed rules refused — against a brute-force reference on random pods.
 */
import { describe, expect, it } from 'vitest';
import type { CapCandidate } from '../../../shared/counting/cap-rules.js';
import { fillPod, type PodRules } from '../../../shared/counting/pods.js';
import { InvalidCountQueryError } from '../../../shared/counting/query.js';
import { prng } from '../../../shared/random/prng.js';

const ad = (id: string, ad: number, advertiser: string, campaign = 1): CapCandidate => ({
  id,
  entities: { ad, adGroup: 1, campaign, advertiser },
  caps: [],
});

describe('fillPod', () => {
  it('a pod of 4 with one ad per advertiser and no repeated creative', () => {
    const ranked = [
      ad('a1', 11, 'A'),
      ad('a2', 12, 'A'),
      ad('b1', 21, 'B'),
      ad('b1-again', 21, 'B'),
      ad('c1', 31, 'C'),
      ad('c2', 32, 'C'),
      ad('d1', 41, 'D'),
      ad('e1', 51, 'E'),
    ];
    const fill = fillPod(ranked, { slots: 4, separation: [{ level: 'advertiser', max: 1 }] });
    expect(fill.placed.map((c) => c.id)).toEqual(['a1', 'b1', 'c1', 'd1']);
    expect(fill.skipped.map((s) => [s.candidate.id, s.reason, s.level])).toEqual([
      ['a2', 'separation', 'advertiser'],
      ['b1-again', 'repeat', 'ad'],
      ['c2', 'separation', 'advertiser'],
      ['e1', 'pod-full', undefined],
    ]);
  });

  it('slots already served count against every rule and take their slots', () => {
    const served = [ad('s1', 11, 'A'), ad('s2', 21, 'B')];
    const ranked = [ad('a', 11, 'X'), ad('b', 22, 'B'), ad('c', 33, 'C'), ad('d', 44, 'D')];
    const fill = fillPod(ranked, { slots: 3, separation: [{ level: 'advertiser', max: 1 }] }, served);
    expect(fill.placed.map((c) => c.id)).toEqual(['c']);
    expect(fill.skipped.map((s) => s.reason)).toEqual(['repeat', 'separation', 'pod-full']);
  });

  it('noRepeat null allows the same creative twice; max 2 per advertiser', () => {
    const ranked = [ad('1', 11, 'A'), ad('2', 11, 'A'), ad('3', 11, 'A')];
    const fill = fillPod(ranked, { slots: 4, noRepeat: null, separation: [{ level: 'advertiser', max: 2 }] });
    expect(fill.placed.map((c) => c.id)).toEqual(['1', '2']);
  });

  it('refuses malformed rules and a candidate without the compared id, naming them', () => {
    expect(() => fillPod([], { slots: 0 })).toThrow(InvalidCountQueryError);
    expect(() => fillPod([], { slots: 0 })).toThrow(/slots is 0: give an integer ≥ 1/);
    expect(() => fillPod([], { slots: 2, separation: [{ level: 'advertiser', max: 0 }] })).toThrow(
      /separation on advertiser has max 0/,
    );
    expect(() =>
      fillPod([{ id: 'x', entities: { ad: 1 }, caps: [] }], {
        slots: 2,
        separation: [{ level: 'advertiser', max: 1 }],
      }),
    ).toThrow(/candidate x has no "advertiser" id, which the pod's rules compare/);
  });

  it('agrees with a brute-force reference on random pods', () => {
    const rand = prng(20261128);
    for (let round = 0; round < 500; round++) {
      const n = Math.floor(rand() * 12);
      const ranked = Array.from({ length: n }, (_, i) =>
        ad(`c${i}`, 1 + Math.floor(rand() * 6), `A${Math.floor(rand() * 4)}`, Math.floor(rand() * 3)),
      );
      const rules: PodRules = {
        slots: 1 + Math.floor(rand() * 5),
        separation: rand() < 0.7 ? [{ level: 'advertiser', max: 1 + Math.floor(rand() * 2) }] : [],
        ...(rand() < 0.2 ? { noRepeat: null } : rand() < 0.2 ? { noRepeat: 'campaign' } : {}),
      };
      // Reference: the greedy rule stated directly over the placed list.
      const placed: CapCandidate[] = [];
      for (const c of ranked) {
        if (placed.length >= rules.slots) continue;
        const level = rules.noRepeat === undefined ? 'ad' : rules.noRepeat;
        if (level !== null && placed.some((p) => String(p.entities[level]) === String(c.entities[level])))
          continue;
        const sep = rules.separation ?? [];
        if (
          sep.some((s) => placed.filter((p) => p.entities[s.level] === c.entities[s.level]).length >= s.max)
        )
          continue;
        placed.push(c);
      }
      const fill = fillPod(ranked, rules);
      expect(fill.placed, `round=${round}`).toEqual(placed);
      expect(fill.placed.length + fill.skipped.length).toBe(n);
    }
  });
});
