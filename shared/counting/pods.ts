/**
 * Ad pods (CTV breaks of several slots): which candidates fill a pod under competitive
 * separation — at most N ads of one advertiser (or any entity level) per pod — and without a
 * repeated creative. Pure: the ad server ranks its capped candidates, then fills the pod with
 * {@link fillPod}; what was already served in the pod (a pod filled slot by slot) is passed in.
 * Caps across pods of one stream session are ordinary caps keyed on the session
 * (docs/counting.md, "Pods and stream sessions").
 */
import type { CapCandidate } from './cap-rules.js';
import { InvalidCountQueryError } from './event-log.js';

/** The rules of one pod. */
export interface PodRules {
  /** Slots in the pod: an integer ≥ 1. */
  readonly slots: number;
  /**
   * Competitive separation: at most `max` ads per entity of `level` in the pod, e.g.
   * `[{ level: 'advertiser', max: 1 }]` (no two ads of one advertiser). @default none
   */
  readonly separation?: readonly { readonly level: string; readonly max: number }[];
  /**
   * The level a repeat is judged on: no two slots with the same id of it (`'ad'`: no creative
   * twice). @default 'ad'; `null` allows repeats
   */
  readonly noRepeat?: string | null;
}

/** Why a candidate was left out of the pod. */
export type PodSkipReason = 'pod-full' | 'repeat' | 'separation';

/** The pod's fill. */
export interface PodFill {
  /** The candidates placed, in slot order (after those already in the pod). */
  readonly placed: readonly CapCandidate[];
  /** The candidates left out, each with its reason (and, for separation, the level). */
  readonly skipped: readonly {
    readonly candidate: CapCandidate;
    readonly reason: PodSkipReason;
    readonly level?: string;
  }[];
}

function check(rules: PodRules, where: string): void {
  if (!Number.isSafeInteger(rules.slots) || rules.slots < 1) {
    throw new InvalidCountQueryError(
      `${where}: slots is ${JSON.stringify(rules.slots)}: give an integer ≥ 1.`,
    );
  }
  for (const s of rules.separation ?? []) {
    if (!Number.isSafeInteger(s.max) || s.max < 1) {
      throw new InvalidCountQueryError(
        `${where}: separation on ${s.level} has max ${JSON.stringify(s.max)}: give an integer ≥ 1 (ads of one ${s.level} per pod).`,
      );
    }
  }
}

/** The entity id of `level` as a comparable string, or throws naming the candidate. */
function idAt(c: CapCandidate, level: string, where: string): string {
  const v = c.entities[level];
  if (v === undefined || v === null) {
    throw new InvalidCountQueryError(
      `${where}: candidate ${c.id ?? JSON.stringify(c.entities)} has no "${level}" id, which the pod's rules compare.`,
    );
  }
  return String(v);
}

/**
 * Fills a pod from `ranked` (best first; usually the allowed candidates of a cap check): each
 * candidate in turn is placed unless the pod is full, its `noRepeat` id is already in the pod,
 * or a separation level already has `max` of its entity. `served` are the pod's slots already
 * filled (they count against every rule and take slots). Throws {@link InvalidCountQueryError}
 * for malformed rules or a candidate without an id a rule compares.
 */
export function fillPod(
  ranked: readonly CapCandidate[],
  rules: PodRules,
  served: readonly CapCandidate[] = [],
): PodFill {
  check(rules, 'pod');
  const repeatLevel = rules.noRepeat === undefined ? 'ad' : rules.noRepeat;
  const separation = rules.separation ?? [];
  const seen = new Set<string>();
  const perEntity = separation.map(() => new Map<string, number>());
  const take = (c: CapCandidate, where: string) => {
    if (repeatLevel !== null) seen.add(idAt(c, repeatLevel, where));
    separation.forEach((s, i) => {
      const id = idAt(c, s.level, where);
      const m = perEntity[i] as Map<string, number>;
      m.set(id, (m.get(id) ?? 0) + 1);
    });
  };
  for (const c of served) take(c, 'pod served');
  let free = rules.slots - served.length;
  const placed: CapCandidate[] = [];
  const skipped: { candidate: CapCandidate; reason: PodSkipReason; level?: string }[] = [];
  for (const c of ranked) {
    if (free <= 0) {
      skipped.push({ candidate: c, reason: 'pod-full' });
      continue;
    }
    if (repeatLevel !== null && seen.has(idAt(c, repeatLevel, 'pod'))) {
      skipped.push({ candidate: c, reason: 'repeat', level: repeatLevel });
      continue;
    }
    const over = separation.findIndex(
      (s, i) => ((perEntity[i] as Map<string, number>).get(idAt(c, s.level, 'pod')) ?? 0) >= s.max,
    );
    if (over >= 0) {
      skipped.push({
        candidate: c,
        reason: 'separation',
        level: (separation[over] as { level: string }).level,
      });
      continue;
    }
    take(c, 'pod');
    placed.push(c);
    free--;
  }
  return { placed, skipped };
}
