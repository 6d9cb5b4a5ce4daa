/**
 * evaluateCaps against a brute-force reference that decodes every member and counts each cap on
 * its own: whole verdicts (allowed / rejected order, every hit with its count, entity and
 * remaining, the strictest cap) on random requests — mixed layout versions, ids as numbers,
 * decimal strings and above 2^53, actions and view types by name or code, windows on event
 * timestamps ± 1 ms (window (now − w, now]) and beyond retention, interleaved levels, entity blocks
 * — and the working memory reused
 * from call to call (large request, then small ones; a call nested inside another).
 */
import { describe, expect, it } from 'vitest';
import { planKeys, planVerdicts } from '../../../shared/counting/cap-keys.js';
import { capLogOf } from '../../../shared/counting/cap-log.js';
import { countCaps, evaluateCapLog, requestCounts } from '../../../shared/counting/caps.js';
import { decodeRecord } from '../../../shared/counting/event-decode.js';
import { type ActionEvent, encodeActionEvent } from '../../../shared/counting/event-encode.js';
import {
  type CandidateVerdict,
  type CapCandidate,
  type CapCheckResult,
  type CapRule,
  type CapStatus,
  evaluateCaps,
} from '../../../shared/counting/query.js';
import { ACTIONS, actionEventSchema, type EventSchema, VIEW_TYPES } from '../../../shared/counting/schema.js';
import { prng } from '../../../shared/random/prng.js';
import { DAY_MS, HOUR_MS, MINUTE_MS } from '../../../shared/time/clock.js';

const now = Date.UTC(2026, 10, 21, 13, 7);
const v2 = actionEventSchema.extend(4, [{ name: 'placement', kind: 'id', width: 8, required: false }]);
const LEVELS = ['ad', 'adGroup', 'campaign', 'advertiser', 'placement'] as const;

const int = (rand: () => number, lo: number, hi: number) => lo + Math.floor(rand() * (hi - lo + 1));
const pick = <T>(rand: () => number, xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)] as T;

/** Small id pools so events and candidates meet; two ids above 2^53 differing only in the low bits. */
const BIG = ['18446744073709551557', '18446744073709551556'];
const idPool = (level: string): readonly (number | string)[] =>
  level === 'placement' ? [1, 2, 3] : [1, 2, 3, 4, 5, 4294967296, 4294967297, ...BIG];

interface Decoded {
  readonly ts: number;
  readonly action: number;
  readonly viewType: number;
  readonly ids: ReadonlyMap<string, bigint>;
}

function decodeAll(members: readonly Buffer[], schema: EventSchema): Decoded[] {
  return members.map((m) => {
    const layout = schema.layouts.get(m[0] as number);
    if (!layout) throw new Error(`no layout v${m[0]}`);
    const at = (name: string) => layout.byName.get(name)?.offset;
    const ids = new Map<string, bigint>();
    for (const level of LEVELS) {
      const offset = at(level);
      ids.set(level, offset === undefined ? 0n : m.readBigUInt64BE(offset));
    }
    return {
      ts: Number(m.readBigUInt64BE(at('timestamp') as number)),
      action: m[at('action') as number] as number,
      viewType: m[at('viewType') as number] as number,
      ids,
    };
  });
}

const code = (names: Record<string, number>, v: string | number) => (typeof v === 'number' ? v : names[v]);

/** Each cap counted on its own from decoded events; verdicts built as documented. */
function reference(
  userEvents: readonly Decoded[],
  candidates: readonly CapCandidate[],
  notBefore: number,
  /** Other identities' events by kind; a kind absent here is missing from the request (refused). */
  others?: ReadonlyMap<string, readonly Decoded[]>,
): CapCheckResult {
  const allowed: CandidateVerdict[] = [];
  const rejected: CandidateVerdict[] = [];
  candidates.forEach((c, ci) => {
    const statuses: CapStatus[] = c.caps.map((cap) => {
      if (cap.block) return { cap, entity: String(c.entities[cap.level]), count: 0, remaining: 0 };
      const key = cap.key === 'user' ? undefined : cap.key;
      const events = key === undefined ? userEvents : others?.get(key);
      if (events === undefined) {
        const entity = String(c.entities[cap.level]);
        return { cap, entity, count: 0, remaining: 0, key: key as string, missingIdentity: true as const };
      }
      const entity = BigInt(c.entities[cap.level] as string | number);
      // A conversion cap counts its stopAfter action; the others their action (impression).
      const action = code(ACTIONS, cap.stopAfter ?? cap.action ?? 'impression');
      const view = cap.viewType === undefined ? undefined : code(VIEW_TYPES, cap.viewType);
      // Recency and conversion caps are max 1 over their window (docs/counting.md); a lifetime
      // cap, and a conversion cap without withinMs, count from the flight's start (else the
      // retention).
      const windowMs = cap.windowMs ?? cap.recencyMs ?? cap.withinMs;
      const from = windowMs === undefined ? (c.flightStartMs ?? notBefore) : now - windowMs + 1;
      const max = cap.max ?? 1;
      const count = events.filter(
        (e) =>
          e.ts >= from &&
          e.ts >= notBefore &&
          e.ids.get(cap.level) === entity &&
          e.action === action &&
          (view === undefined || e.viewType === view),
      ).length;
      const status = { cap, entity: String(c.entities[cap.level]), count, remaining: max - count };
      return key === undefined ? status : { ...status, key };
    });
    // A block is the strictest; else the least remaining, ties → the longest window.
    const windowOf = (s: CapStatus) =>
      s.cap.block ? 0 : (s.cap.windowMs ?? s.cap.recencyMs ?? s.cap.withinMs ?? Number.MAX_SAFE_INTEGER);
    let strictest: CapStatus | undefined = statuses.find((s) => s.cap.block);
    for (const s of strictest ? [] : statuses) {
      if (
        !strictest ||
        s.remaining < strictest.remaining ||
        (s.remaining === strictest.remaining && windowOf(s) > windowOf(strictest))
      ) {
        strictest = s;
      }
    }
    const hits = statuses.filter((s) => s.remaining <= 0);
    const id = c.id ?? String(c.entities.ad ?? ci);
    const verdict = strictest
      ? { id, allowed: hits.length === 0, strictest, hits }
      : { id, allowed: hits.length === 0, hits };
    (hits.length === 0 ? allowed : rejected).push(verdict);
  });
  return { allowed, rejected };
}

function randomLog(rand: () => number, size: number): { members: Buffer[]; timestamps: number[] } {
  const members: Buffer[] = [];
  const timestamps: number[] = [];
  for (let i = 0; i < size; i++) {
    const timestamp = now - int(rand, 0, 40 * DAY_MS) + (rand() < 0.05 ? int(rand, 0, 10 * MINUTE_MS) : 0);
    timestamps.push(timestamp);
    const insertionId = Buffer.alloc(16);
    insertionId.writeUInt32BE(i + 1, 0);
    const withPlacement = rand() < 0.5;
    const event = {
      userId: 1,
      timestamp,
      insertionId,
      action: pick(rand, ['impression', 'impression', 'click', 3] as const),
      viewType: pick(rand, ['home', 'search', 2, 3] as const),
      ad: pick(rand, idPool('ad')),
      adGroup: pick(rand, idPool('adGroup')),
      campaign: pick(rand, idPool('campaign')),
      advertiser: pick(rand, idPool('advertiser')),
      ...(withPlacement ? { placement: pick(rand, idPool('placement')) } : {}),
    } as ActionEvent;
    const schema = withPlacement ? v2 : actionEventSchema;
    members.push(decodeRecord(encodeActionEvent(event, schema), schema).member);
  }
  return { members, timestamps };
}

function randomCandidates(rand: () => number, count: number, timestamps: readonly number[]): CapCandidate[] {
  // Windows that put an event exactly on a window start, or 1 ms after it, plus usual ones.
  const edge = () => {
    const ts = pick(rand, timestamps);
    return Math.max(1, now - ts + pick(rand, [0, 1, -1]));
  };
  return Array.from({ length: count }, (_, ci) => {
    const entities: Record<string, unknown> = {};
    for (const level of LEVELS) {
      const v = pick(rand, idPool(level));
      // The same id as a number or a decimal string is the same entity.
      entities[level] = typeof v === 'number' && rand() < 0.3 ? String(v) : v;
    }
    // Placement 0 = the zero value v1 events have for the dimension they lack.
    if (rand() < 0.2) entities.placement = 0;
    // A flight that started within the shortest retention the tests use (10 days), often exactly
    // on an event's timestamp or 1 ms off it.
    const flightStartMs =
      rand() < 0.5
        ? undefined
        : rand() < 0.5
          ? Math.max(
              now - 10 * DAY_MS,
              pick(rand, timestamps.length ? timestamps : [now]) + pick(rand, [0, 1, -1]),
            )
          : now - int(rand, 0, 10 * DAY_MS);
    const caps: CapRule[] = Array.from({ length: int(rand, 0, 9) }, (): CapRule => {
      if (rand() < 0.04) return { level: pick(rand, LEVELS), block: true };
      if (rand() < 0.15) {
        // A recency cap: max 1 over recencyMs, often exactly on (or 1 ms off) an event's age.
        const recency: { level: string; recencyMs: number; action?: string | number } = {
          level: pick(rand, LEVELS),
          recencyMs: rand() < 0.5 ? edge() : pick(rand, [MINUTE_MS, 30 * MINUTE_MS, HOUR_MS, DAY_MS]),
        };
        if (rand() < 0.4) recency.action = pick(rand, ['impression', 'click', 2, 3, 'save'] as const);
        return recency;
      }
      if (flightStartMs !== undefined && rand() < 0.15) {
        // A lifetime cap: since the flight's start (often exactly on, or 1 ms off, an event).
        const lifetime: { level: string; lifetime: true; max: number; action?: string | number } = {
          level: pick(rand, LEVELS),
          lifetime: true,
          max: int(rand, 1, 12),
        };
        if (rand() < 0.4) lifetime.action = pick(rand, ['impression', 'click', 3] as const);
        return lifetime;
      }
      if (rand() < 0.1) {
        // A conversion cap: stop after a click or an action code, over withinMs or the flight.
        const conversion: { level: string; stopAfter: string | number; withinMs?: number } = {
          level: pick(rand, LEVELS),
          stopAfter: pick(rand, ['click', 'conversion', 2, 3] as const),
        };
        if (rand() < 0.5) conversion.withinMs = rand() < 0.5 ? edge() : pick(rand, [HOUR_MS, 7 * DAY_MS]);
        return conversion;
      }
      const cap: {
        level: string;
        windowMs: number;
        max: number;
        action?: string | number;
        viewType?: string | number;
      } = {
        level: pick(rand, LEVELS),
        windowMs: rand() < 0.3 ? edge() : pick(rand, [HOUR_MS, DAY_MS, 7 * DAY_MS, 30 * DAY_MS, 60 * DAY_MS]),
        max: int(rand, 1, 12),
      };
      if (rand() < 0.4) cap.action = pick(rand, ['impression', 'click', 2, 3, 'save'] as const);
      if (rand() < 0.3) cap.viewType = pick(rand, ['home', 'search', 2, 3] as const);
      return cap;
    });
    const flight = flightStartMs === undefined ? {} : { flightStartMs };
    return rand() < 0.2 ? { entities, caps, ...flight } : { id: `c${ci}`, entities, caps, ...flight };
  });
}

describe('evaluateCaps agrees with a brute-force reference', () => {
  it('on random logs and requests (whole verdicts)', () => {
    const seed = Number(process.env.COUNTING_SEED ?? 20261121);
    const rand = prng(seed);
    for (let round = 0; round < 60; round++) {
      const { members, timestamps } = randomLog(rand, int(rand, 0, 400));
      const events = decodeAll(members, v2);
      // A large request now and then grows the reused working memory; small ones follow it.
      const candidates = randomCandidates(rand, round % 10 === 0 ? 300 : int(rand, 0, 40), timestamps);
      const notBefore = now - pick(rand, [30 * DAY_MS, 10 * DAY_MS, 90 * DAY_MS]);
      const log = rand() < 0.5 ? Buffer.concat(members) : members;
      const expected = reference(events, candidates, notBefore);
      expect(evaluateCaps(log, candidates, now, notBefore, v2), `seed=${seed} round=${round}`).toEqual(
        expected,
      );
      const capLog = capLogOf(Buffer.concat(members), v2);
      expect(
        evaluateCapLog(capLog, candidates, now, notBefore, v2),
        `cap log seed=${seed} round=${round}`,
      ).toEqual(expected);
    }
  });

  it('on requests of one action in any view type (the bucketed scan), and ones just past its limits', () => {
    const seed = Number(process.env.COUNTING_SEED ?? 20261125);
    const rand = prng(seed);
    for (let round = 0; round < 40; round++) {
      const { members, timestamps } = randomLog(rand, int(rand, 0, 400));
      const events = decodeAll(members, v2);
      // Up to 8 distinct windows (some exactly on an event or 1 ms off), or 9 (the general scan);
      // one action for every cap, or (every 4th round) a second one (the general scan too).
      const windowCount = round % 5 === 4 ? 9 : int(rand, 1, 8);
      const windows = new Set<number>();
      while (windows.size < windowCount) {
        windows.add(
          rand() < 0.4
            ? Math.max(
                1,
                now - pick(rand, timestamps.length ? timestamps : [now - HOUR_MS]) + pick(rand, [0, 1, -1]),
              )
            : pick(rand, [HOUR_MS, DAY_MS, 7 * DAY_MS, 30 * DAY_MS, 60 * DAY_MS]) + int(rand, 0, 3),
        );
      }
      const action = pick(rand, [undefined, 'impression', 'click', 3] as const);
      const candidates = randomCandidates(rand, int(rand, 0, 60), timestamps).map((c, ci) => ({
        ...c,
        caps: c.caps.map((cap, k): CapRule => {
          if (cap.block) return cap;
          const windowMs = [...windows][(ci + k) % windows.size] as number;
          const second =
            round % 4 === 3 && k === 1 ? { action: 'save' } : action === undefined ? {} : { action };
          if (cap.recencyMs !== undefined) return { level: cap.level, recencyMs: windowMs, ...second };
          // Lifetime caps keep their flight start (one more window start for the bucketed scan).
          if (cap.lifetime) return { level: cap.level, lifetime: true, max: cap.max, ...second };
          if (cap.stopAfter !== undefined) {
            const stopAfter: string | number =
              'action' in second ? (second.action ?? 'impression') : 'impression';
            return { level: cap.level, stopAfter, withinMs: windowMs };
          }
          return { level: cap.level, windowMs, max: cap.max, ...second };
        }),
      }));
      const notBefore = now - pick(rand, [30 * DAY_MS, 10 * DAY_MS, 90 * DAY_MS]);
      const expected = reference(events, candidates, notBefore);
      expect(
        evaluateCaps(Buffer.concat(members), candidates, now, notBefore, v2),
        `seed=${seed} round=${round}`,
      ).toEqual(expected);
      expect(
        evaluateCapLog(capLogOf(Buffer.concat(members), v2), candidates, now, notBefore, v2),
        `cap log seed=${seed} round=${round}`,
      ).toEqual(expected);
    }
  });

  it('a call nested inside another (a getter on a candidate) gets its own working memory', () => {
    const rand = prng(7);
    const { members, timestamps } = randomLog(rand, 300);
    const events = decodeAll(members, v2);
    const inner = randomCandidates(rand, 30, timestamps);
    const outer = randomCandidates(rand, 30, timestamps);
    // The first candidate reads its ad id (so the getter below runs) whatever the random caps are.
    outer[0] = { ...(outer[0] as CapCandidate), caps: [{ level: 'ad', windowMs: DAY_MS, max: 3 }] };
    let nested: CapCheckResult | undefined;
    const entities = outer[0]?.entities as Record<string, unknown>;
    const ad = entities.ad;
    Object.defineProperty(entities, 'ad', {
      enumerable: true,
      get() {
        nested ??= evaluateCaps(members, inner, now, now - 30 * DAY_MS, v2);
        return ad;
      },
    });
    const got = evaluateCaps(members, outer, now, now - 30 * DAY_MS, v2);
    expect(nested).toBeDefined();
    expect(got).toEqual(reference(events, outer, now - 30 * DAY_MS));
    expect(nested).toEqual(reference(events, inner, now - 30 * DAY_MS));
  });

  it('a request too large for the shared working memory, then small ones', () => {
    const rand = prng(13);
    const { members, timestamps } = randomLog(rand, 120);
    const events = decodeAll(members, v2);
    const large = randomCandidates(rand, 5000, timestamps);
    expect(evaluateCaps(members, large, now, now - 30 * DAY_MS, v2)).toEqual(
      reference(events, large, now - 30 * DAY_MS),
    );
    for (let round = 0; round < 3; round++) {
      const small = randomCandidates(rand, 25, timestamps);
      expect(evaluateCaps(members, small, now, now - 30 * DAY_MS, v2)).toEqual(
        reference(events, small, now - 30 * DAY_MS),
      );
    }
  });

  it('a failed call leaves nothing behind for the next one', () => {
    const rand = prng(11);
    const { members, timestamps } = randomLog(rand, 200);
    const events = decodeAll(members, v2);
    const bad = randomCandidates(rand, 20, timestamps);
    bad.push({ id: 'bad', entities: { ad: 1 }, caps: [{ level: 'campaign', windowMs: DAY_MS, max: 1 }] });
    expect(() => evaluateCaps(members, bad, now, 0, v2)).toThrow(/candidate bad cap 0/);
    const good = randomCandidates(rand, 20, timestamps);
    expect(evaluateCaps(members, good, now, 0, v2)).toEqual(reference(events, good, 0));
  });

  it('caps on several identities (planKeys, one count per identity, planVerdicts) agree with the reference', () => {
    const rand = prng(Number(process.env.COUNTING_SEED ?? 20261128));
    for (let round = 0; round < 40; round++) {
      const user = randomLog(rand, int(rand, 0, 300));
      const household = randomLog(rand, int(rand, 0, 300));
      const device = randomLog(rand, int(rand, 0, 100));
      const logs = new Map([
        ['1', user.members],
        ['h2', household.members],
        ['d3', device.members],
      ]);
      const timestamps = [...user.timestamps, ...household.timestamps];
      const candidates = randomCandidates(rand, int(rand, 0, 40), timestamps).map((c) => ({
        ...c,
        caps: c.caps.map((cap): CapRule => {
          if (cap.block) return cap;
          const r = rand();
          return r < 0.4 ? cap : { ...cap, key: r < 0.5 ? 'user' : r < 0.8 ? 'household' : 'device' };
        }),
      }));
      // Every third round the request has no device id: device caps are refused.
      const withDevice = round % 3 !== 0;
      const identities = { user: '1', household: '2', ...(withDevice ? { device: '3' } : {}) };
      const notBefore = now - pick(rand, [30 * DAY_MS, 90 * DAY_MS]);
      const plan = planKeys(v2, candidates, identities, 'refuse');
      const counts = requestCounts(plan.groupOf.length);
      plan.groups.forEach((g, group) => {
        const subset = { groupOf: plan.groupOf, group };
        // Every other round through the identity's cap log instead of its log.
        const log = logs.get(g.tag) ?? [];
        if (round % 2 === 0)
          countCaps(log, undefined, undefined, candidates, now, notBefore, v2, subset, counts);
        else {
          const capLog = capLogOf(Buffer.concat(log), v2);
          countCaps(undefined, capLog, undefined, candidates, now, notBefore, v2, subset, counts);
        }
      });
      const others = new Map([
        ['household', decodeAll(household.members, v2)],
        ...(withDevice ? [['device', decodeAll(device.members, v2)] as const] : []),
      ]);
      const expected = reference(decodeAll(user.members, v2), candidates, notBefore, others);
      const got = planVerdicts(candidates, plan, counts);
      const { noIdentity, ...verdicts } = got;
      expect(verdicts, `round=${round}`).toEqual(expected);
      const refused = candidates.flatMap((c) => c.caps).filter((cap) => cap.key === 'device').length;
      if (!withDevice && refused > 0)
        expect(noIdentity).toEqual({ policy: 'refuse', refused, uncapped: 0, coarser: 0 });
      else expect(noIdentity).toBeUndefined();
    }
  });
});
