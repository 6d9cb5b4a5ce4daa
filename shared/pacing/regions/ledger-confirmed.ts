/**
 * What a region confirmed of a plan-day, from the replicated spend ledger (a global table: every
 * replica holds every region's wins, each item naming the region that booked it). The home's
 * reclaim of a lost region's allocation needs exactly that (docs/pacing.md, "Many regions"):
 * Σ clearing prices of the region's wins for the plan — a campaign plan's campaign-day, an arm
 * plan's arm, an account plan's campaigns — version 1 items (no region) counted too, the
 * conservative reading (a larger figure reclaims less).
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { ResolvedPlan } from '../../budget/model.js';
import { SpendLedger } from '../../spend/ledger.js';

/** Options of {@link ledgerConfirmedOf}. */
export interface LedgerConfirmedOptions {
  readonly client: DynamoDBClient;
  /** The spend-ledger table (this region's replica). */
  readonly tableName: string;
  /** The campaigns of an account (an account plan's spend is theirs). */
  readonly campaignsOfAccount: (accountId: string) => readonly string[] | Promise<readonly string[]>;
}

/** Σ clearing prices of a plan's entries on a day, from one ledger view. */
async function planDaySum(
  ledger: SpendLedger,
  options: LedgerConfirmedOptions,
  plan: ResolvedPlan,
  day: string,
  regions: 'own' | 'all',
): Promise<number> {
  const campaigns =
    plan.level === 'account' ? await options.campaignsOfAccount(plan.accountId) : [plan.campaignId as string];
  let total = 0;
  for (const campaignId of campaigns) {
    const arm = plan.level === 'arm' ? plan.armId : undefined;
    for (const e of await ledger.entries(campaignId, day, arm, regions)) total += e.clearingPriceMicros;
  }
  return total;
}

/**
 * A plan-day's confirmed spend in every region, micros (the ledger as replicated here; each item
 * once): what a flight's day spent, for the flight closer.
 */
export function ledgerPlanDaySpendOf(
  options: LedgerConfirmedOptions & { readonly region: string },
): (plan: ResolvedPlan, day: string) => Promise<number> {
  const ledger = new SpendLedger({
    client: options.client,
    tableName: options.tableName,
    region: options.region,
  });
  return (plan, day) => planDaySum(ledger, options, plan, day, 'all');
}

/** A region's confirmed spend of a plan-day, micros (the ledger as replicated here). */
export function ledgerConfirmedOf(
  options: LedgerConfirmedOptions,
): (region: string, plan: ResolvedPlan, day: string) => Promise<number> {
  const ledgers = new Map<string, SpendLedger>();
  const ledgerOf = (region: string) => {
    let l = ledgers.get(region);
    if (!l) {
      // A ledger "as region r sees it" reads r's items (and version 1 items) only.
      l = new SpendLedger({ client: options.client, tableName: options.tableName, region });
      ledgers.set(region, l);
    }
    return l;
  };
  return (region, plan, day) => planDaySum(ledgerOf(region), options, plan, day, 'own');
}
