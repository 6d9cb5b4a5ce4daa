/**
 * The delivery bands of a shard's plans, counted by the publishing pacer once a minute (pure):
 * what the `PlansBehind`, `PlansBehindByReason` and `PlansAhead` metrics carry and the
 * `DeliveryBehind` / `DeliveryAhead` alarms watch (docs/spend.md, "Delivery metrics and alarms").
 * Counts, never one series per plan: `paceline spend report` names the plans.
 *
 * Counted: campaign and arm plans (what a buyer sets) of paced modes (an `asap` plan's curve is
 * its ceiling: it has no pace to be behind of), once their curve expects at least
 * {@link DELIVERY_MIN_EXPECTED_SHARE} of the day's budget — before that, one float spent makes a
 * plan "ahead" and one second without a win "behind".
 */

import { isOpenAt, planDayWindows } from '../budget/daypart.js';
import type { ResolvedPlan } from '../budget/model.js';
import { dayWindow } from '../budget/time-zone.js';
import { type BehindReason, deliveryOf } from './delivery.js';
import { pacingModeOf } from './modes.js';
import { evaluateCurve, type PlanPacingParams, type PlanSpendSnapshot } from './types.js';

/** A plan is counted once its curve expects this share of its budget. */
export const DELIVERY_MIN_EXPECTED_SHARE = 0.05;

/** Every reason, in {@link deliveryOf}'s order. */
export const BEHIND_REASONS: readonly BehindReason[] = [
  'out-of-window',
  'stale-parameters',
  'account-cap',
  'no-traffic',
  'lost-auctions',
  'catching-up',
];

/** A shard's plans per band (one minute's snapshot). */
export interface DeliveryCounts {
  /** Plans counted (paced campaign and arm plans past the minimum expected share). */
  readonly watched: number;
  readonly onPace: number;
  readonly ahead: number;
  /** Behind, per reason. */
  readonly behind: Readonly<Record<BehindReason, number>>;
}

/** Σ of {@link DeliveryCounts.behind}. */
export function behindTotal(c: DeliveryCounts): number {
  let n = 0;
  for (const r of BEHIND_REASONS) n += c.behind[r];
  return n;
}

/** The tick's inputs, index-aligned with the plan list. */
export interface DeliveryCountInput {
  readonly plans: readonly { readonly plan: ResolvedPlan }[];
  /** Each campaign's plan indexes (account, campaign, arms). */
  readonly byCampaign: readonly Int32Array[];
  readonly spend: readonly PlanSpendSnapshot[];
  readonly results: readonly { readonly params: PlanPacingParams }[];
  readonly nowMs: number;
}

/** Counts the bands (module comment). The pacer's own parameters are fresh by definition. */
export function deliveryCounts(input: DeliveryCountInput): DeliveryCounts {
  const { plans, spend, results, nowMs } = input;
  const behind: Record<BehindReason, number> = {
    'out-of-window': 0,
    'stale-parameters': 0,
    'account-cap': 0,
    'no-traffic': 0,
    'lost-auctions': 0,
    'catching-up': 0,
  };
  let watched = 0;
  let onPace = 0;
  let ahead = 0;
  // 1 = counted (campaign, arm); for account plans 2 = at its expected spend, 3 = not (shared by
  // every campaign of the account: evaluated once).
  const seen = new Uint8Array(plans.length);
  const figures = (i: number) => {
    const s = spend[i] as PlanSpendSnapshot;
    const params = (results[i] as { params: PlanPacingParams }).params;
    return {
      s,
      params,
      expected: evaluateCurve(params.curve, nowMs),
      actual: s.confirmedMicros + s.inFlightMicros,
    };
  };
  for (const idx of input.byCampaign) {
    let accountAtCap = false;
    for (const i of idx) {
      const plan = (plans[i] as { plan: ResolvedPlan }).plan;
      if (plan.level === 'account') {
        if (seen[i] === 0) {
          const a = figures(i);
          seen[i] = a.expected > 0 && a.actual >= 0.99 * a.expected ? 2 : 3;
        }
        accountAtCap = seen[i] === 2;
        continue;
      }
      if (seen[i] === 1) continue;
      seen[i] = 1;
      if (!isPaced(plan.pacingMode)) continue;
      const { s, params, expected, actual } = figures(i);
      if (!(expected >= DELIVERY_MIN_EXPECTED_SHARE * params.budgetMicros) || expected <= 0) continue;
      watched++;
      const d = deliveryOf({
        expectedMicros: expected,
        actualMicros: actual,
        inFlightMicros: s.inFlightMicros,
        fresh: true,
        fullSpeed: params.throttle === 1 && params.bidMultiplier === 1,
        accountAtCap,
        windowClosed: windowClosedAt(plan, nowMs),
      });
      if (d.band === 'ahead') ahead++;
      else if (d.band === 'on-pace') onPace++;
      else behind[d.reason ?? 'catching-up']++;
    }
  }
  return { watched, onPace, ahead, behind };
}

/** A dayparted plan whose windows are closed at `nowMs` (its day in its zone). */
function windowClosedAt(plan: ResolvedPlan, nowMs: number): boolean {
  if (!plan.daypart) return false;
  const w = planDayWindows(plan, dayWindow(nowMs, plan.timeZone));
  return w !== undefined && !isOpenAt(w, nowMs);
}

function isPaced(mode: string): boolean {
  try {
    return pacingModeOf(mode).paced;
  } catch {
    return false; // a mode this version does not know is paced on the fail-safe: not counted
  }
}
