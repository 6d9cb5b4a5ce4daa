/**
 * The live dashboard's data model: pure functions from what the stores hold (the published
 * campaign hash, the live spend hash, shard statuses, dead-letter counts) to one sample per
 * region and poll, and a bounded in-memory history of those samples. No I/O here: the adapter
 * (`collect.ts`) reads the stores, the server (`server.ts`) serves what this module keeps.
 */
import { localDate } from '../../shared/budget/time-zone.js';
import {
  decodeCampaignHash,
  decodeShardPublish,
  effectivePublish,
  PacingDecodeError,
  type PublishedPlan,
} from '../../shared/pacing/codec.js';
import { type Delivery, deliveryOf } from '../../shared/pacing/delivery.js';
import type { PublishSwitch, ShardStatus } from '../../shared/pacing/status.js';
import { evaluateCurve } from '../../shared/pacing/types.js';
import { planDaySnapshot } from '../../shared/spend/live-counters.js';

/** A campaign as the budgets table describes it (its campaign plan). */
export interface CampaignRef {
  readonly accountId: string;
  readonly campaignId: string;
  /** Daily budget of the campaign plan, micros. */
  readonly budgetMicros: number;
  /** The account's time zone (decides the budget day before anything is published). */
  readonly timeZone: string;
  /** The plan's allocation authority (several regions; absent: the deployment's first region). */
  readonly allocHome?: string;
  readonly allocFence?: number;
}

/**
 * The campaigns to chart: the `n` with the largest campaign-plan budgets (ties by id). Ranked by
 * budget, not by spend, so the set — and each campaign's colour — stays put while spend moves.
 */
export function topCampaigns(refs: readonly CampaignRef[], n: number): CampaignRef[] {
  return [...refs]
    .sort((a, b) => b.budgetMicros - a.budgetMicros || (a.campaignId < b.campaignId ? -1 : 1))
    .slice(0, Math.max(0, n));
}

/** Freshness of a campaign's published parameters as the dashboard saw them. */
export type PublishState = 'published' | 'missing' | 'malformed';

/** One campaign at one instant: live spend beside the published target and parameters. */
export interface CampaignReading {
  readonly campaignId: string;
  readonly accountId: string;
  /** The campaign plan's daily budget (budgets table), micros: the whole budget, every region. */
  readonly budgetMicros: number;
  /**
   * This region's share of it, as its pacer published it (the soft split its E(t) ends at; the
   * whole budget with one region); null when nothing current is published.
   */
  readonly shareMicros: number | null;
  /** This region's allocation (the hard cap its guards lease within); null when none. */
  readonly allocationMicros: number | null;
  /** Its guards may lease until then (epoch ms); null when no allocation. */
  readonly allocationUntilMs: number | null;
  /** The plan's allocation authority and fence (several regions); null with one region. */
  readonly authority: { readonly home: string; readonly fence: number } | null;
  /** Budget day the figures belong to (`YYYY-MM-DD`, advertiser-local). */
  readonly day: string;
  /** Confirmed spend from the live counters; null when the plan-day is not initialised. */
  readonly spentMicros: number | null;
  /** Live in-flight bids; null when not initialised. */
  readonly inFlightMicros: number | null;
  /** E(now) from the published curve; null when nothing (valid) is published. */
  readonly targetMicros: number | null;
  readonly throttle: number | null;
  readonly bidMultiplier: number | null;
  /** Age of the publish, ms; null when nothing is published. */
  readonly publishedAgeMs: number | null;
  readonly publish: PublishState;
  /**
   * Spent + in flight against E(now), the band buyers watch and why when behind (the pacing
   * report's rule, shared/pacing/delivery.ts; this region's figures, the account plan not read).
   */
  readonly delivery: Delivery;
  /** Why the published hash could not be decoded (publish = malformed). */
  readonly error?: string;
}

/** The plan whose curve a campaign's chart shows: the campaign plan, else the first present. */
function chartedPlan(plans: ReadonlyMap<string, PublishedPlan>): PublishedPlan | undefined {
  return plans.get('campaign') ?? plans.values().next().value;
}

/**
 * Decodes a campaign hash (HGETALL reply) without throwing: malformed hashes are shown as such.
 * `shardClaim` (`pt`, `pat`, `rp` of the shard's claim hash) gives the freshness readers use
 * (contract v2); without it, the age of the hash's last write.
 */
export function readPublished(
  hash: Readonly<Record<string, string>>,
  shardClaim?: Readonly<Record<string, string | null | undefined>>,
): {
  plan?: PublishedPlan;
  publishedAtMs?: number;
  error?: string;
} {
  try {
    const own = decodeCampaignHash(hash);
    if (!own) return {};
    const published = effectivePublish(own, shardClaim ? decodeShardPublish(shardClaim) : undefined);
    const plan = chartedPlan(published.plans);
    return { ...(plan ? { plan } : {}), publishedAtMs: published.publishedAtMs };
  } catch (error) {
    if (error instanceof PacingDecodeError) return { error: error.message };
    throw error;
  }
}

/**
 * The budget day whose live counters to read: the published plan's day while it has not ended
 * (the pacer and the guard agree on it), else the advertiser-local date now.
 */
export function spendDay(ref: CampaignRef, plan: PublishedPlan | undefined, nowMs: number): string {
  if (plan && nowMs >= plan.dayWindow.startMs && nowMs < plan.dayWindow.endMs) return plan.day;
  return localDate(nowMs, ref.timeZone);
}

/** One campaign's reading from its published hash and its live spend hash (both HGETALL replies). */
export function campaignReading(
  ref: CampaignRef,
  publishedHash: Readonly<Record<string, string>>,
  spendHash: Readonly<Record<string, string>>,
  nowMs: number,
  shardClaim?: Readonly<Record<string, string | null | undefined>>,
  deploymentRegions: readonly string[] = [],
): CampaignReading {
  const { plan, publishedAtMs, error } = readPublished(publishedHash, shardClaim);
  const day = spendDay(ref, plan, nowMs);
  const live = spendHash.r === undefined ? undefined : planDaySnapshot(spendHash, nowMs);
  const current = plan !== undefined && plan.day === day;
  const num = (v: string | undefined) => (v === undefined ? null : Number(v));
  const delivery = deliveryOf({
    expectedMicros: current ? evaluateCurve(plan.curve, nowMs) : 0,
    actualMicros: live ? live.confirmedMicros + live.inFlightMicros : 0,
    inFlightMicros: live ? live.inFlightMicros : 0,
    fresh: current,
    fullSpeed: current && plan.throttle === 1 && plan.bidMultiplier === 1,
    accountAtCap: false,
  });
  return {
    campaignId: ref.campaignId,
    accountId: ref.accountId,
    budgetMicros: ref.budgetMicros,
    shareMicros: current ? plan.budgetMicros : null,
    allocationMicros: num(spendHash.a),
    allocationUntilMs: num(spendHash.ae),
    authority:
      deploymentRegions.length > 1
        ? { home: ref.allocHome ?? (deploymentRegions[0] as string), fence: ref.allocFence ?? 0 }
        : null,
    day,
    spentMicros: live ? live.confirmedMicros : null,
    inFlightMicros: live ? live.inFlightMicros : null,
    targetMicros: current ? evaluateCurve(plan.curve, nowMs) : null,
    throttle: current ? plan.throttle : null,
    bidMultiplier: current ? plan.bidMultiplier : null,
    publishedAgeMs: publishedAtMs === undefined ? null : Math.max(0, nowMs - publishedAtMs),
    publish: error !== undefined ? 'malformed' : plan ? 'published' : 'missing',
    delivery,
    ...(error === undefined ? {} : { error }),
  };
}

/** A pacer shard as the dashboard shows it (the `paceline status` fields it charts or lists). */
export type ShardReading = Pick<
  ShardStatus,
  'shard' | 'leader' | 'epoch' | 'lastTick' | 'ageMs' | 'override' | 'publisher' | 'publishingRegion'
>;

/** Everything read from one region in one poll. */
export interface RegionSample {
  readonly region: string;
  /** When the sample was taken (the dashboard's injected clock). */
  readonly atMs: number;
  readonly campaigns: readonly CampaignReading[];
  readonly shards: readonly ShardReading[];
  /** The region's publish switch: which region's pacer publishes into its cache, since when. */
  readonly publishSwitch: PublishSwitch | null;
  /** Quarantined records per source (function name). */
  readonly deadLetters: Readonly<Record<string, number>>;
  /** Parts that could not be read this round (`redis: …`), shown on the page; never thrown. */
  readonly errors: readonly string[];
}

/** A point of a time series: [epoch ms, value]. */
export type Point = readonly [number, number];

/** The series the history keeps, by kind. */
export type SeriesKind = 'spent' | 'target' | 'throttle' | 'multiplier' | 'age' | 'deadLetters';

/** Series name: `<kind>/<id>` (id = campaign id, shard number or dead-letter source). */
export function seriesName(kind: SeriesKind, id: string | number): string {
  return `${kind}/${id}`;
}

/** The points one sample adds, by series name (a null value adds no point: a gap, not a zero). */
export function samplePoints(sample: RegionSample): Map<string, number> {
  const out = new Map<string, number>();
  const put = (kind: SeriesKind, id: string | number, v: number | null) => {
    if (v !== null && Number.isFinite(v)) out.set(seriesName(kind, id), v);
  };
  for (const c of sample.campaigns) {
    put('spent', c.campaignId, c.spentMicros);
    put('target', c.campaignId, c.targetMicros);
    put('throttle', c.campaignId, c.throttle);
    put('multiplier', c.campaignId, c.bidMultiplier);
  }
  for (const s of sample.shards) put('age', s.shard, s.ageMs);
  for (const [source, n] of Object.entries(sample.deadLetters)) put('deadLetters', source, n);
  return out;
}

/** Points kept per series by default: 30 minutes at one sample every 2 s. */
export const DEFAULT_MAX_POINTS = 900;

/** Options of {@link RegionHistory}. */
export interface HistoryOptions {
  /** Points kept per series; older ones are dropped. @default DEFAULT_MAX_POINTS */
  readonly maxPoints?: number;
  /** Series kept per region; the least recently updated go first. @default 200 */
  readonly maxSeries?: number;
}

/** The bounded history of one region: points per series plus the latest sample. */
export class RegionHistory {
  private readonly series = new Map<string, Point[]>();
  private readonly maxPoints: number;
  private readonly maxSeries: number;
  latest: RegionSample | undefined;

  constructor(
    readonly region: string,
    options: HistoryOptions = {},
  ) {
    this.maxPoints = Math.max(1, options.maxPoints ?? DEFAULT_MAX_POINTS);
    this.maxSeries = Math.max(1, options.maxSeries ?? 200);
  }

  /** Adds a sample's points; samples older than the last one of a series are ignored there. */
  add(sample: RegionSample): void {
    this.latest = sample;
    for (const [name, v] of samplePoints(sample)) {
      let points = this.series.get(name);
      if (points === undefined) points = [];
      // Re-insert: Map order is then least recently updated first, which is what eviction needs.
      this.series.delete(name);
      this.series.set(name, points);
      const last = points[points.length - 1];
      if (last !== undefined && last[0] >= sample.atMs) continue;
      points.push([sample.atMs, v]);
      if (points.length > this.maxPoints) points.splice(0, points.length - this.maxPoints);
    }
    while (this.series.size > this.maxSeries) {
      const oldest = this.series.keys().next().value as string;
      this.series.delete(oldest);
    }
  }

  /** Points of one series (oldest first); empty when unknown. */
  points(name: string): readonly Point[] {
    return this.series.get(name) ?? [];
  }

  /** Every series, for a page that connects mid-way. */
  toJSON(): { region: string; latest: RegionSample | null; series: Record<string, readonly Point[]> } {
    return { region: this.region, latest: this.latest ?? null, series: Object.fromEntries(this.series) };
  }
}
