/**
 * Which campaign hashes a publish writes (contract v2, shared/pacing/codec.ts): the publisher's
 * memory of what each hash holds, and per tick the fields to write — nothing for a campaign whose
 * published values are all within the deadband of the computed ones, unless its bounded republish
 * comes (then every field that differs at all, and the header); every field for a publisher that
 * does not know what is stored (changed plans, a new campaign, a takeover).
 */
import type { CampaignBudgets } from '../budget/model.js';
import type { DayWindow } from '../budget/time-zone.js';
import { encodePlanParams } from './codec.js';
import {
  campaignFields,
  curveText,
  type PlanAtDay,
  type PlanList,
  type PlanResult,
  plansKeyOf,
} from './plan-list.js';

export type { PlanResult } from './plan-list.js';

import type { CampaignWrite } from './publisher.js';
import type { CurvePoints, PlanPacingParams } from './types.js';

interface CampaignMemory {
  plansKey: string;
  /** Per plan, in publishing order (aligned with the campaign's plans): what is stored. */
  encoded: string[];
  /** The parameters and day behind `encoded` (deadband comparisons). */
  params: PlanPacingParams[];
  days: DayWindow[];
  curves: CurvePoints[];
  /** `e:` values as stored (a new curve object with the same knots is not rewritten). */
  encodedCurves: string[];
  expiryRefreshedAt: number;
  /** The campaign's republish slot: rewritten when (tick + phase) mod republishTicks = 0. */
  phase: number;
}

/** A plan's fields to commit once the publish is accepted: (campaign, plan index, result, p: written, e: written). */
type PlanUpdate = [CampaignMemory, number, PlanResult, boolean, string | undefined];

/** Settings of {@link CampaignHashes} (ShardPacerOptions'). */
export interface CampaignHashesOptions {
  readonly republishTicks: number;
  readonly deadband: { readonly throttle: number; readonly multiplier: number };
  readonly expiryRefreshMs: number;
}

/** The tick's campaign writes and how to remember them once they landed. */
export interface CampaignWrites {
  readonly writes: CampaignWrite[];
  commit(): void;
}

/** What this publisher believes each campaign hash holds, and the writes that bring it up to date. */
export class CampaignHashes {
  private readonly published = new Map<string, CampaignMemory>();

  constructor(private readonly options: CampaignHashesOptions) {}

  /** Forgets what is stored: the next publish writes every field (a takeover, a lost claim). */
  clear(): void {
    this.published.clear();
  }

  /**
   * The campaign hashes to write this tick (see the module comment). On a takeover, whose reload
   * read what each hash holds (`stored`, per campaign: `plans`, then `p:` and `e:` per plan), the
   * header and every field that differs from it at all: the hash ends as a whole rewrite leaves it.
   */
  writes(
    campaigns: readonly CampaignBudgets[],
    planList: PlanList,
    results: readonly PlanResult[],
    nowMs: number,
    tick: number,
    stored?: readonly (readonly (string | undefined)[] | undefined)[],
  ): CampaignWrites {
    const writes: CampaignWrite[] = [];
    const updates: PlanUpdate[] = [];
    const created: [string, CampaignMemory][] = [];
    const refreshed: CampaignMemory[] = [];
    const K = this.options.republishTicks;
    for (let ci = 0; ci < campaigns.length; ci++) {
      const b = campaigns[ci] as CampaignBudgets;
      const idx = planList.byCampaign[ci] as Int32Array;
      const plansKey = plansKeyOf(b);
      const campaignId = b.campaign.campaignId;
      const memory = this.published.get(campaignId);
      // Nothing known of what is stored (a new publisher) or the plans changed: every field.
      if (!memory || memory.plansKey !== plansKey) {
        // Replace the hash (drop fields of removed plans) only when this publisher knows the plans
        // changed; a new publisher overwrites every field instead (readers read only the plans
        // listed in `plans`, so a field left from a removed plan is inert).
        const replace = memory !== undefined;
        // What the hash holds (a takeover's read; a replaced hash holds nothing that stays).
        const held = replace ? undefined : stored?.[ci];
        const phase = memory?.phase ?? phaseOf(campaignId, K);
        const m = wholeCampaign(planList, idx, results, plansKey, campaignFields(b), held, nowMs, phase);
        writes.push({ campaignId, mode: replace ? 'F' : 'X', fields: m.fields });
        created.push([campaignId, m.memory]);
        continue;
      }
      const due = (tick + memory.phase) % K === 0;
      const refresh = nowMs - memory.expiryRefreshedAt >= this.options.expiryRefreshMs;
      const fields = this.changedFields(memory, planList, idx, results, campaignFields(b), due, updates);
      if (fields || due || refresh) {
        writes.push({ campaignId, mode: refresh ? 'X' : 'P', fields: fields ?? [] });
        if (refresh) refreshed.push(memory);
      }
    }
    return {
      writes,
      commit: () => {
        for (const [m, j, r, paramsChanged, curve] of updates) {
          // A plan written for its curve alone keeps the parameters stored before.
          if (paramsChanged) {
            m.encoded[j] = r.encoded as string;
            m.params[j] = r.params;
            m.days[j] = r.day;
          }
          if (curve !== undefined) {
            m.curves[j] = r.params.curve;
            m.encodedCurves[j] = curve;
          }
        }
        for (const [campaignId, m] of created) this.published.set(campaignId, m);
        for (const m of refreshed) m.expiryRefreshedAt = nowMs;
      },
    };
  }

  /**
   * A known campaign's fields that moved beyond the deadband (every field that differs at all when
   * `due`), or undefined; the plans written are added to `updates`.
   */
  private changedFields(
    m: CampaignMemory,
    planList: PlanList,
    idx: Int32Array,
    results: readonly PlanResult[],
    names: readonly string[],
    due: boolean,
    updates: PlanUpdate[],
  ): string[] | undefined {
    const dbT = this.options.deadband.throttle;
    const dbM = this.options.deadband.multiplier;
    let fields: string[] | undefined;
    for (let j = 0; j < idx.length; j++) {
      const at = idx[j] as number;
      const r = results[at] as PlanResult;
      const p = r.params;
      // A new curve object is compared by its encoding (controllers may rebuild equal curves).
      let curve: string | undefined;
      if (m.curves[j] !== p.curve) {
        curve = curveText((planList.list[at] as PlanAtDay).memory, p.curve);
        if (curve === m.encodedCurves[j]) {
          // Same knots as stored: remember the object (safe whatever this publish's fate).
          m.curves[j] = p.curve;
          curve = undefined;
        }
      }
      const q = m.params[j] as PlanPacingParams;
      const d = m.days[j] as DayWindow;
      // Within the deadband: same budget, mode and day, throttle and multiplier moved little.
      const within =
        p.budgetMicros === q.budgetMicros &&
        p.mode === q.mode &&
        p.day === q.day &&
        r.day.startMs === d.startMs &&
        r.day.endMs === d.endMs &&
        Math.abs(p.throttle - q.throttle) <= dbT &&
        Math.abs(p.bidMultiplier - q.bidMultiplier) <= dbM * q.bidMultiplier;
      let paramsChanged = false;
      if (!within || due) {
        if (r.encoded === undefined) r.encoded = encodePlanParams(p, r.day);
        paramsChanged = r.encoded !== m.encoded[j];
      }
      if (!paramsChanged && curve === undefined) continue;
      fields = fields ?? [];
      if (paramsChanged) fields.push(names[1 + 2 * j] as string, r.encoded as string);
      if (curve !== undefined) fields.push(names[2 + 2 * j] as string, curve);
      updates.push([m, j, r, paramsChanged, curve]);
    }
    return fields;
  }
}

/**
 * Every field of a campaign whose stored values are not known, less those `held` (what a
 * takeover read from the hash: `plans`, then `p:` and `e:` per plan, as `names` lists them)
 * already holds; with the memory of what the hash holds once they land.
 */
function wholeCampaign(
  planList: PlanList,
  idx: Int32Array,
  results: readonly PlanResult[],
  plansKey: string,
  names: readonly string[],
  held: readonly (string | undefined)[] | undefined,
  nowMs: number,
  phase: number,
): { fields: string[]; memory: CampaignMemory } {
  const fields: string[] = held?.[0] === plansKey ? [] : ['plans', plansKey];
  const m: CampaignMemory = {
    plansKey,
    encoded: new Array(idx.length),
    params: new Array(idx.length),
    days: new Array(idx.length),
    curves: new Array(idx.length),
    encodedCurves: new Array(idx.length),
    expiryRefreshedAt: nowMs,
    phase,
  };
  for (let j = 0; j < idx.length; j++) {
    const at = idx[j] as number;
    const { memory } = planList.list[at] as PlanAtDay;
    const r = results[at] as PlanResult;
    if (r.encoded === undefined) r.encoded = encodePlanParams(r.params, r.day);
    const curve = curveText(memory, r.params.curve);
    if (held?.[1 + 2 * j] !== r.encoded) fields.push(names[1 + 2 * j] as string, r.encoded);
    if (held?.[2 + 2 * j] !== curve) fields.push(names[2 + 2 * j] as string, curve);
    m.encodedCurves[j] = curve;
    m.encoded[j] = r.encoded;
    m.params[j] = r.params;
    m.days[j] = r.day;
    m.curves[j] = r.params.curve;
  }
  return { fields, memory: m };
}

/** A campaign's republish slot in [0, k): spreads the forced rewrites evenly over the ticks. */
function phaseOf(campaignId: string, k: number): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < campaignId.length; i++) h = Math.imul(h ^ campaignId.charCodeAt(i), 0x01000193);
  return (h >>> 0) % k;
}
