/**
 * The Redis key schema of live spend counters, version 1 — a contract other languages read
 * (documented in docs/spend.md). All keys of one plan-day share the hash tag `{<scope>}`, so
 * every script touching them runs in one slot, in cluster mode too.
 *
 * - `pl:1:{<scope>}:<planId>:<day>`      hash: the plan-day's state (fields below)
 * - `pl:1:{<scope>}:<planId>:<day>:n`    hash: notice dedup, bid key → `W` (win applied) | `L` (loss applied) |
 *                                          `R` (win restored from the ledger: counted, in-flight not yet released)
 * - `pl:1:{<scope>}:<planId>:<day>:s:<epoch>` hash: staging area of a rebuild from the ledger
 *
 * scope: `c:<campaignId>` (campaign and arm plans) or `a:<accountId>` (account plans);
 * planId: `campaign`, `arm:<armId>` or `account`; day: the advertiser's local date `YYYY-MM-DD`.
 *
 * Fields of the state hash (all integers in decimal, micros unless noted):
 * - `r`      epoch id: present ⇔ the hash was initialised from the ledger (reset sentinel)
 * - `q`, `t` slot width and in-flight lifetime T, ms
 * - `g`      rejoin grace: no lease is granted before this instant (epoch ms; 0 = none)
 * - `c`      confirmed spend
 * - `l:<k>`  budget leased to guards in slot k (k = floor(epochMs / q))
 * - `f:<k>`  in-flight bid amounts of slot k (may be transiently negative: release before settle)
 * - `sk`, `sl`, `sf` running sums of the lease script: no slot field below `sk` exists; `sl` / `sf`
 *   are the sums of the `l:` / `f:` fields (docs/spend.md, "Running sums")
 * A slot k is live at time now iff (k + 1)·q + t > now; dead slots count as zero.
 */
import type { ResolvedPlan } from '../budget/model.js';

/** Key schema version (the `1` in `pl:1:`). */
export const SPEND_KEY_VERSION = 1;

/** Keys of one plan-day. */
export interface PlanDayKeys {
  readonly state: string;
  readonly notices: string;
  staging(epoch: string): string;
}

/** Keys of a plan's day. */
export function planDayKeys(plan: Pick<ResolvedPlan, 'scope' | 'planId'>, day: string): PlanDayKeys {
  const state = `pl:${SPEND_KEY_VERSION}:{${plan.scope}}:${plan.planId}:${day}`;
  return { state, notices: `${state}:n`, staging: (epoch) => `${state}:s:${epoch}` };
}

/** Field of the notice-dedup hash for a bid: bid ids are unique per campaign, account plans span campaigns. */
export function noticeField(plan: Pick<ResolvedPlan, 'level'>, campaignId: string, bidId: string): string {
  return plan.level === 'account' ? `${campaignId}/${bidId}` : bidId;
}

/** First live slot at `nowMs` (slot k is live iff k ≥ this). */
export function firstLiveSlot(nowMs: number, slotMs: number, inFlightTtlMs: number): number {
  return Math.floor((nowMs - inFlightTtlMs) / slotMs);
}
