/**
 * The regions of a multi-region run (sim/regions/engine.ts), built from the scenario's region
 * specs: each `SimRegion`, the replicated `region-spend` table they share, and what a home reads
 * of another region's confirmed spend through its replica of the ledger.
 */
import type { CampaignBudgets, ResolvedPlan } from '../../shared/budget/model.js';
import { allocationConfig } from '../../shared/pacing/regions/allocation-config.js';
import type { RedisClient } from '../../shared/redis/connect.js';
import type { ScenarioBudgets } from '../budgets.js';
import { minFloat } from '../engine/bidding.js';
import type { RegionsRunOptions } from '../engine/types.js';
import { SimRegion } from './region.js';
import { ReplicatedTable } from './replication.js';
import { type ScenarioRegion, within } from './scenario.js';

/**
 * The regions of a run, their replicated `region-spend` table and what each region's home reads
 * of another's confirmed spend (its replica of the ledger: a write reaches it after the lag, and
 * not while either side is cut off).
 */
export function buildRegions(
  options: RegionsRunOptions,
  specs: readonly ScenarioRegion[],
  budgets: ScenarioBudgets,
  live: Map<string, CampaignBudgets>,
  onError: (line: string) => void,
): { regions: SimRegion[]; table: ReplicatedTable } {
  const { clock, scenario, strategy } = options;
  const names = specs.map((s) => s.name);
  const config = allocationConfig(names);
  const specOf = (r: string) => specs[names.indexOf(r)];
  const table = new ReplicatedTable({
    regions: names,
    lagMsOf: (r) => specOf(r)?.replicationLagMs ?? 0,
    cutAt: (r, at) => within(specOf(r)?.unreachable ?? [], at),
    clock,
  });
  const campaignsOfAccount = (a: string) =>
    scenario.campaigns.filter((c) => c.accountId === a).map((c) => c.id);
  const regions: SimRegion[] = [];
  /** When a write region `from` made at `atMs` reaches region `to`'s replica (lag, then cuts). */
  const arrivalAt = (from: string, to: string, atMs: number): number => {
    let at = atMs + (specOf(from)?.replicationLagMs ?? 0);
    const cuts = [...(specOf(from)?.unreachable ?? []), ...(specOf(to)?.unreachable ?? [])];
    for (let moved = true; moved; ) {
      moved = false;
      for (const c of cuts)
        if (at >= c.fromMs && at < c.toMs) {
          at = c.toMs;
          moved = true;
        }
    }
    return at;
  };
  /** What `region` confirmed of a plan-day in `asker`'s replica of the ledger (its reclaims). */
  const confirmedOf =
    (asker: string) =>
    async (region: string, plan: ResolvedPlan, day: string): Promise<number> => {
      const r = regions[names.indexOf(region)];
      if (!r) return 0;
      const now = clock.now();
      const ids = plan.level === 'account' ? campaignsOfAccount(plan.accountId) : [plan.campaignId as string];
      let total = 0;
      for (const id of ids)
        for (const e of await r.ledger.entries(id, day, plan.level === 'arm' ? plan.armId : undefined)) {
          const booked = r.bookedAt.get(e.bidId) ?? 0;
          if (region === asker || arrivalAt(region, asker, booked) <= now) total += e.clearingPriceMicros;
        }
      return total;
    };
  specs.forEach((spec, i) => {
    regions.push(
      new SimRegion({
        spec,
        redis: options.redis[i] as RedisClient,
        clock,
        config,
        strategy,
        auction: scenario.market.auction,
        audienceTimeZone: scenario.timeZone,
        budgets,
        live,
        table,
        guards: scenario.guards,
        minFloatMicros: minFloat(scenario),
        campaignsOfAccount,
        confirmedOf: confirmedOf(spec.name),
        onError,
      }),
    );
  });
  return { regions, table };
}
