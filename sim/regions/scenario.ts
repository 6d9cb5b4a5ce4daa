/**
 * The `regions` field of a scenario (docs/pacing-quality.md, "Several regions"): the deployment's
 * regions in order — the first is every plan's allocation home, as `PACELINE_REGIONS` orders them —
 * each with its share of the traffic, the shifts of that share over the days, the lag of its
 * writes to the global tables, and its faults:
 *
 * - `region-lost` (any region): its pacer, ad servers and track-spend stop for [from, to); its
 *   requests go to the live regions in proportion to their shares (the exchange's failover), its
 *   notices wait in its stream until it is back; its cache survives;
 * - `home-region-unreachable` (the first region only): replication to and from it stops for
 *   [from, to) (what it writes, and what it should read, arrives when the cut ends); it keeps
 *   serving its own requests.
 *
 * Validation errors name the field by its JSON path, like the rest of the format.
 */
import { type Json, type Reader, ScenarioError } from '../scenario-reader.js';

/** A time range [from, to) in epoch ms. */
export interface RegionFaultRange {
  readonly fromMs: number;
  readonly toMs: number;
}

/** One region of a multi-region scenario. */
export interface ScenarioRegion {
  readonly name: string;
  /** Share of the requests from the first simulated instant. */
  readonly traffic: number;
  /** Later shares, by instant (ascending). */
  readonly shifts: readonly { readonly atMs: number; readonly traffic: number }[];
  /** How long this region's writes to the global tables take to reach the other regions. */
  readonly replicationLagMs: number;
  /** Periods the region is down (`region-lost`). */
  readonly lost: readonly RegionFaultRange[];
  /** Periods replication to and from it stops (`home-region-unreachable`; the home only). */
  readonly unreachable: readonly RegionFaultRange[];
}

const REGION_NAME = /^[a-z]{2}(-gov)?-[a-z]+-\d{1,2}$/;
const MAX_REGIONS = 5;

/** The share of `region` at `atMs` (its last shift at or before it). */
export function trafficAt(region: ScenarioRegion, atMs: number): number {
  let share = region.traffic;
  for (const s of region.shifts) {
    if (s.atMs > atMs) break;
    share = s.traffic;
  }
  return share;
}

/** True while `atMs` lies in one of `ranges`. */
export function within(ranges: readonly RegionFaultRange[], atMs: number): boolean {
  for (const r of ranges) if (atMs >= r.fromMs && atMs < r.toMs) return true;
  return false;
}

/**
 * Validates `regions` (an array) of the scenario `r`; `window` is the scenario's days. Returns
 * undefined when the field is absent (one region).
 */
export function parseRegions(
  r: Reader,
  window: { readonly fromMs: number; readonly toMs: number },
): ScenarioRegion[] | undefined {
  if (!r.has('regions')) return undefined;
  const raw = r.array('regions');
  if (raw.length < 2 || raw.length > MAX_REGIONS)
    throw new ScenarioError(
      'regions',
      `give 2–${MAX_REGIONS} regions (got ${raw.length}); omit the field for one region.`,
    );
  const inside = (x: Reader, k: string) => {
    const ms = x.instant(k);
    if (ms < window.fromMs || ms >= window.toMs)
      throw new ScenarioError(x.at(k), 'must lie inside the scenario’s days.');
    return ms;
  };
  const regions = raw.map((v, i): ScenarioRegion => {
    const x = r.item('regions', i, v as Json);
    x.only(['name', 'traffic', 'shifts', 'replicationLagSeconds', 'faults']);
    const name = x.string('name');
    if (!REGION_NAME.test(name))
      throw new ScenarioError(x.at('name'), `${JSON.stringify(name)} is not a region name (like us-west-2).`);
    const shifts = x.array('shifts').map((sv, k) => {
      const s = x.item('shifts', k, sv as Json);
      s.only(['at', 'traffic']);
      return { atMs: inside(s, 'at'), traffic: s.share('traffic') };
    });
    for (let k = 1; k < shifts.length; k++)
      if ((shifts[k]?.atMs as number) <= (shifts[k - 1]?.atMs as number))
        throw new ScenarioError(
          `${x.at('shifts')}[${k}].at`,
          'shifts must be in time order, one per instant.',
        );
    const lost: RegionFaultRange[] = [];
    const unreachable: RegionFaultRange[] = [];
    x.array('faults').forEach((fv, k) => {
      const f = x.item('faults', k, fv as Json);
      f.only(['kind', 'from', 'to']);
      const kind = f.string('kind');
      if (kind !== 'region-lost' && kind !== 'home-region-unreachable')
        throw new ScenarioError(
          f.at('kind'),
          `unknown region fault ${JSON.stringify(kind)}: use region-lost or home-region-unreachable.`,
        );
      if (kind === 'home-region-unreachable' && i !== 0)
        throw new ScenarioError(
          f.at('kind'),
          'home-region-unreachable applies to the home region: regions[0], every plan’s allocation home.',
        );
      const fromMs = inside(f, 'from');
      const toMs = f.instant('to');
      if (toMs <= fromMs) throw new ScenarioError(f.at('to'), 'must be after `from`.');
      if (toMs > window.toMs) throw new ScenarioError(f.at('to'), 'must lie inside the scenario’s days.');
      for (const other of [...lost, ...unreachable])
        if (fromMs < other.toMs && other.fromMs < toMs)
          throw new ScenarioError(f.path, 'overlaps another fault of this region: merge them.');
      (kind === 'region-lost' ? lost : unreachable).push({ fromMs, toMs });
    });
    return {
      name,
      traffic: x.share('traffic'),
      shifts,
      replicationLagMs: Math.round(
        x.number('replicationLagSeconds', { min: 0, max: 600, fallback: 1 }) * 1000,
      ),
      lost,
      unreachable,
    };
  });
  const names = new Set<string>();
  regions.forEach((g, i) => {
    if (names.has(g.name)) throw new ScenarioError(`regions[${i}].name`, `region ${g.name} is listed twice.`);
    names.add(g.name);
  });
  // The shares sum to 1 at the start and after every shift; one region is up at every instant.
  const instants = [window.fromMs, ...regions.flatMap((g) => g.shifts.map((s) => s.atMs))];
  for (const at of instants) {
    const total = regions.reduce((a, g) => a + trafficAt(g, at), 0);
    if (Math.abs(total - 1) > 1e-6)
      throw new ScenarioError(
        'regions',
        `traffic shares sum to ${Number(total.toFixed(6))} at ${new Date(at).toISOString()}: make them sum to 1 at the start and after every shift.`,
      );
  }
  const downAt = regions.flatMap((g) => g.lost.map((l) => l.fromMs));
  for (const at of downAt)
    if (regions.every((g) => within(g.lost, at)))
      throw new ScenarioError(
        'regions',
        `every region is lost at ${new Date(at).toISOString()}: keep one region up.`,
      );
  return regions;
}
