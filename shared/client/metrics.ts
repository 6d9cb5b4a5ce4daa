/**
 * Client-side metrics of the ad-server client: what an ad-server team graphs and alarms on —
 * decisions by outcome, the share answered `no-budget` (budget exhausted or a lease not back in
 * time: a rising share with budget left means Redis is slow or unreachable), the pacing cache hit
 * rate and fail-safe serves, lease calls, and the event producers' counters.
 */
import type { Decision } from '../spend/guard.js';

/** Outcome of one `bid()` call. */
export type DecisionOutcome = 'bid' | 'throttled' | Exclude<Decision, 'bid'>;

/** What `onDecision` receives for every `bid()` call. */
export interface DecisionRecord {
  readonly campaignId: string;
  readonly armId?: string;
  readonly outcome: DecisionOutcome;
  /** Freshness of the pacing parameters used (`stale` / `missing` = fail-safe throttle). */
  readonly pacing: 'fresh' | 'stale' | 'missing';
  /** The bid price after the pacing multiplier, micros (bids only). */
  readonly priceMicros?: number;
}

/** Counters of a client (cumulative in `metrics()`; differences in `onSnapshot`'s second argument). */
export interface ClientMetrics {
  /** `bid()` calls by outcome. */
  readonly decisions: Readonly<Record<DecisionOutcome, number>> & { readonly total: number };
  /** no-budget answers / decisions that reached the guard (0 when none did). */
  readonly noBudgetShare: number;
  /** Pacing lookups served from the local cache / all lookups (0 when none). */
  readonly pacingCacheHitRate: number;
  readonly pacingLookups: number;
  readonly pacingCacheHits: number;
  /** Lookups served the fail-safe (parameters stale or never published). */
  readonly pacingFailSafeServes: number;
  /** Budget lease / settle round trips to Redis. */
  readonly leaseCalls: number;
  /** Events put on the streams / refused or failed after retries. */
  readonly eventsSent: number;
  readonly eventsFailed: number;
  /** Background errors reported to `onError`. */
  readonly errors: number;
  /**
   * Cap-check caps whose identity the request lacked, by what the `noIdentity` policy did
   * (docs/counting.md, "Identities"): refused the candidate, left it uncapped, or counted on the
   * coarser identity.
   */
  readonly capsWithoutIdentity: {
    readonly refused: number;
    readonly uncapped: number;
    readonly coarser: number;
  };
}

/** The mutable counters a client keeps (internal). */
export interface MetricCounters {
  decisions: Record<DecisionOutcome, number>;
  errors: number;
  eventsFailed: number;
}

/** Fresh counters. */
export function newCounters(): MetricCounters {
  return {
    decisions: { bid: 0, throttled: 0, 'no-budget': 0, 'unknown-campaign': 0, paused: 0 },
    errors: 0,
    eventsFailed: 0,
  };
}

/** Builds a {@link ClientMetrics} from raw counters (derived ratios included). */
export function buildMetrics(raw: {
  readonly decisions: Readonly<Record<DecisionOutcome, number>>;
  readonly pacingLookups: number;
  readonly pacingHits: number;
  readonly pacingFailSafeServes: number;
  readonly leaseCalls: number;
  readonly eventsSent: number;
  readonly eventsFailed: number;
  readonly errors: number;
  readonly capsWithoutIdentity?: ClientMetrics['capsWithoutIdentity'];
}): ClientMetrics {
  const d = raw.decisions;
  const total = d.bid + d.throttled + d['no-budget'] + d['unknown-campaign'] + d.paused;
  const guarded = d.bid + d['no-budget'];
  return {
    decisions: { ...d, total },
    noBudgetShare: guarded === 0 ? 0 : d['no-budget'] / guarded,
    pacingCacheHitRate: raw.pacingLookups === 0 ? 0 : raw.pacingHits / raw.pacingLookups,
    pacingLookups: raw.pacingLookups,
    pacingCacheHits: raw.pacingHits,
    pacingFailSafeServes: raw.pacingFailSafeServes,
    leaseCalls: raw.leaseCalls,
    eventsSent: raw.eventsSent,
    eventsFailed: raw.eventsFailed,
    errors: raw.errors,
    capsWithoutIdentity: { ...(raw.capsWithoutIdentity ?? { refused: 0, uncapped: 0, coarser: 0 }) },
  };
}

/** `b − a` of two cumulative snapshots (ratios recomputed over the interval). */
export function metricsDelta(a: ClientMetrics, b: ClientMetrics): ClientMetrics {
  const decisions = {} as Record<DecisionOutcome, number>;
  for (const k of Object.keys(newCounters().decisions) as DecisionOutcome[]) {
    decisions[k] = b.decisions[k] - a.decisions[k];
  }
  return buildMetrics({
    decisions,
    pacingLookups: b.pacingLookups - a.pacingLookups,
    pacingHits: b.pacingCacheHits - a.pacingCacheHits,
    pacingFailSafeServes: b.pacingFailSafeServes - a.pacingFailSafeServes,
    leaseCalls: b.leaseCalls - a.leaseCalls,
    eventsSent: b.eventsSent - a.eventsSent,
    eventsFailed: b.eventsFailed - a.eventsFailed,
    errors: b.errors - a.errors,
    capsWithoutIdentity: {
      refused: b.capsWithoutIdentity.refused - a.capsWithoutIdentity.refused,
      uncapped: b.capsWithoutIdentity.uncapped - a.capsWithoutIdentity.uncapped,
      coarser: b.capsWithoutIdentity.coarser - a.capsWithoutIdentity.coarser,
    },
  });
}
