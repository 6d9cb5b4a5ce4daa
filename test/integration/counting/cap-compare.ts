/**
 * Random cap checks of every kind (frequency, recency, lifetime, conversion) on the user,
 * household, device and session keys, compared cap by cap with the brute-force reference counter: shared by the
 * differential test (ingest through the store) and the stream-path test (through the local
 * event-source mapping).
 */
import { expect } from 'vitest';
import type { CapCandidate, CountingCap } from '../../../shared/counting/query.js';
import type { ActionStore } from '../../../shared/counting/store.js';
import { DAY_MS, HOUR_MS, MINUTE_MS } from '../../../shared/time/clock.js';
import { actionName, type EventLog, entitiesOf, int, pick, type ReferenceCounter } from './fixtures.js';

/** What {@link compareCaps} compares. */
export interface CapComparison {
  readonly store: ActionStore;
  readonly reference: ReferenceCounter;
  /** The log both were fed (its users, ads, households and devices). */
  readonly log: EventLog;
  readonly rand: () => number;
  readonly rounds: number;
  /** The store's clock now (the reference's retention horizon is 30 days before it). */
  readonly now: number;
  readonly seed: number;
}

/** One random cap of any kind on `level` counting `action`. */
function capOf(rand: () => number, level: string, action: 'impression' | 'click' | 3): CountingCap {
  const windows = [HOUR_MS, 7 * DAY_MS, 30 * DAY_MS, int(rand, 1, 40 * 24 * 60) * MINUTE_MS];
  const kind = rand();
  // Recency (max 1 over recencyMs), lifetime (since the flight's start), conversion (max 1 of
  // stopAfter over withinMs or the flight) and frequency caps.
  if (kind < 0.15) return { level, recencyMs: pick(rand, windows), action };
  if (kind < 0.3) return { level, lifetime: true, max: int(rand, 1, 60), action };
  if (kind < 0.4) {
    return rand() < 0.5
      ? { level, stopAfter: action }
      : { level, stopAfter: action, withinMs: pick(rand, windows) };
  }
  return { level, windowMs: pick(rand, windows), max: int(rand, 1, 60), action };
}

/**
 * `rounds` cap checks, each of every ad with random caps on random keys (the device id missing
 * from one request in five: those caps count on the household under `coarser`); every cap's
 * verdict is compared with the reference. Returns the number of caps compared.
 */
export async function compareCaps(c: CapComparison): Promise<number> {
  const { store, reference, log, rand, now, seed } = c;
  const horizon = now - 30 * DAY_MS;
  let comparisons = 0;
  for (let round = 0; round < c.rounds; round++) {
    const userId = pick(rand, log.userIds);
    // A flight inside the retention: lifetime caps count from its start.
    const flightStartMs = horizon + int(rand, 0, 30 * DAY_MS);
    const caps: CountingCap[][] = [];
    const candidates: CapCandidate[] = log.ads.map((ad, i) => {
      caps[i] = (['ad', 'adGroup', 'campaign', 'advertiser'] as const).flatMap((level) =>
        Array.from({ length: int(rand, 0, 3) }, (): CountingCap => {
          const action = pick(rand, ['impression', 'click', 3] as const);
          // Most caps count on the user; some on the household, the device or the session.
          const k = rand();
          const key = k < 0.55 ? undefined : k < 0.75 ? 'household' : k < 0.9 ? 'device' : 'session';
          return { ...capOf(rand, level, action), ...(key === undefined ? {} : { key }) } as CountingCap;
        }),
      );
      return { id: `c${ad}`, entities: entitiesOf(ad), caps: caps[i] as CountingCap[], flightStartMs };
    });
    const withDevice = rand() < 0.8;
    const identities = {
      user: userId,
      household: log.householdOf.get(userId) as string,
      session: log.sessionOf.get(userId) as string,
      ...(withDevice ? { device: log.deviceOf.get(userId) as string } : {}),
    };
    const tagOf = (cap: CountingCap) =>
      cap.key === 'household' || (cap.key === 'device' && !withDevice)
        ? `h${identities.household}`
        : cap.key === 'device'
          ? `d${identities.device}`
          : cap.key === 'session'
            ? `s${identities.session}`
            : userId;
    const result = await store.checkFrequencyCaps({ identities, candidates, noIdentity: 'coarser' });
    const verdicts = new Map([...result.allowed, ...result.rejected].map((v) => [v.id, v]));
    expect(verdicts.size).toBe(candidates.length);
    for (const [i, candidate] of candidates.entries()) {
      const hits = (caps[i] as CountingCap[]).filter((cap) => {
        const windowMs = cap.windowMs ?? cap.recencyMs ?? cap.withinMs;
        const counted = cap.stopAfter ?? cap.action;
        const action = typeof counted === 'number' ? actionName(counted) : (counted as string);
        const { total } = reference.count(
          tagOf(cap),
          horizon,
          // Window (now − w, now], or from the flight's start; events stamped ahead of now count as now.
          { from: windowMs === undefined ? flightStartMs : now - windowMs + 1, to: Number.MAX_SAFE_INTEGER },
          {
            [cap.level]: [(candidate.entities as Record<string, string>)[cap.level] as string],
            action: [action],
          },
          [],
        );
        return total >= (cap.max ?? 1);
      });
      const v = verdicts.get(candidate.id as string);
      const context = `seed=${seed} round=${round} user=${userId} candidate=${candidate.id}`;
      expect(v?.allowed, context).toBe(hits.length === 0);
      expect(v?.hits.length, context).toBe(hits.length);
      comparisons += (caps[i] as CountingCap[]).length;
    }
  }
  return comparisons;
}
