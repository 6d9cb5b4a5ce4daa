/**
 * The campaigns of a simulated world and their budgets over time, as both engines hold them: each
 * campaign's eligibility salt, advertiser zone and guard questions, the campaigns per segment, and
 * the schedule that activates campaigns (at their creation) and applies budget changes.
 */
import { flightDaysDue } from '../../shared/budget/flight.js';
import type { CampaignBudgets } from '../../shared/budget/model.js';
import { dayWindow, dayWindowOf } from '../../shared/budget/time-zone.js';
import type { ScenarioBudgets } from '../budgets.js';
import type { Scenario, ScenarioCampaign } from '../scenario.js';

/** The guard's question for one campaign (and arm), reused for every bid: no object per bid. */
export interface ReusableBid {
  readonly campaignId: string;
  readonly armId?: string;
  priceMicros: number;
}

/** A campaign of the run. `T` is what a bid books for the scorer (its plan tracks). */
export interface CampaignRun<T> {
  readonly spec: ScenarioCampaign;
  readonly index: number;
  readonly salt: number;
  /** The account's time zone (its advertiser day). */
  readonly timeZone: string;
  budgets: CampaignBudgets | undefined;
  /** Plan tracks a bid falls under, without an arm (`''`) and per arm id (set on activation). */
  tracksByArm: Map<string, T[]>;
  /** Guard questions, without an arm (`''`) and per arm id. */
  readonly guardBids: Map<string, ReusableBid>;
}

/** The plan tracks of a bid of `c` (its arm's, or the campaign's without an arm). */
export function tracksOf<T>(c: CampaignRun<T>, armId: string | undefined): T[] {
  return c.tracksByArm.get(armId ?? '') ?? (c.tracksByArm.get('') as T[]);
}

/** The run's campaigns, by id and per segment (a campaign without segments targets every one). */
export class World<T> {
  readonly campaigns: CampaignRun<T>[];
  readonly byId: Map<string, CampaignRun<T>>;
  /** Campaigns per segment, in the order of the scenario's segments. */
  readonly bySegment: CampaignRun<T>[][];
  /** Campaigns with budgets, as the readers' prefetch takes them (rebuilt on activation). */
  active: { accountId: string; campaignId: string }[] = [];
  private changeIdx = 0;

  constructor(
    private readonly scenario: Scenario,
    seed: number,
    readonly budgets: ScenarioBudgets,
  ) {
    this.campaigns = scenario.campaigns.map((spec, index) => ({
      spec,
      index,
      salt: Math.imul(index + 1, 0x2545f491) ^ seed,
      timeZone: budgets.timeZoneOf(spec),
      budgets: undefined,
      tracksByArm: new Map(),
      guardBids: new Map<string, ReusableBid>([
        ['', { campaignId: spec.id, priceMicros: 0 }],
        ...spec.arms.map((a): [string, ReusableBid] => [
          a.id,
          { campaignId: spec.id, armId: a.id, priceMicros: 0 },
        ]),
      ]),
    }));
    this.byId = new Map(this.campaigns.map((c) => [c.spec.id, c]));
    this.bySegment = [...scenario.segments.keys()].map((s) =>
      this.campaigns.filter((c) => c.spec.segments.length === 0 || c.spec.segments.includes(s)),
    );
  }

  /** The budgets of every campaign that has some. */
  activeBudgets(): CampaignBudgets[] {
    return this.campaigns.flatMap((c) => (c.budgets ? [c.budgets] : []));
  }

  /**
   * Campaigns created by `now` get their budgets, then budget changes due by `now` apply;
   * `setBudgets` is called for each campaign whose budgets are new or changed (after which the
   * active list is rebuilt). Returns whether anything changed.
   */
  applyChanges(
    now: number,
    setBudgets: (c: CampaignRun<T>, b: CampaignBudgets) => void,
    /** A campaign-day's booked spend, for the flight closes (undefined: no closes). */
    flightSpendOf?: (c: CampaignRun<T>, day: string) => number,
  ): boolean {
    const { scenario, budgets } = this;
    let dirty = false;
    const set = (c: CampaignRun<T>, b: CampaignBudgets) => {
      c.budgets = b;
      setBudgets(c, b);
      this.active = this.campaigns
        .filter((x) => x.budgets)
        .map((x) => ({ accountId: x.spec.accountId, campaignId: x.spec.id }));
    };
    for (const c of this.campaigns) {
      if (!c.budgets && (c.spec.createdAtMs === undefined || c.spec.createdAtMs <= now)) {
        set(c, budgets.activate(c.spec, c.spec.createdAtMs ?? scenario.startMs - 86_400_000));
        dirty = true;
      }
    }
    while (
      this.changeIdx < scenario.budgetChanges.length &&
      (scenario.budgetChanges[this.changeIdx]?.atMs ?? 0) <= now
    ) {
      const ch = scenario.budgetChanges[this.changeIdx++] as Scenario['budgetChanges'][number];
      for (const spec of budgets.change(ch, now)) {
        const c = this.byId.get(spec.id) as CampaignRun<T>;
        if (c.budgets) set(c, budgets.budgetsOf(spec));
      }
      dirty = true;
    }
    if (flightSpendOf) dirty = this.closeFlights(now, set, flightSpendOf) || dirty;
    return dirty;
  }

  /**
   * The flight closer's rule (shared/budget/flight.ts, `flightDaysDue`): each flight day due at
   * `now` is closed at the spend the tracker booked for it — in one region exactly what the
   * ledger holds, which the real closer sums.
   */
  private closeFlights(
    now: number,
    set: (c: CampaignRun<T>, b: CampaignBudgets) => void,
    spendOf: (c: CampaignRun<T>, day: string) => number,
  ): boolean {
    let dirty = false;
    for (const c of this.campaigns) {
      const plan = c.budgets?.common.find((p) => p.level === 'campaign');
      if (!plan?.flight) continue;
      const due = flightDaysDue(
        plan,
        now,
        dayWindow(now, c.timeZone).day,
        (d) => dayWindowOf(d, c.timeZone).endMs,
      );
      if (due.length === 0) continue;
      for (const day of due) this.budgets.closeFlightDay(c.spec, day, spendOf(c, day), now);
      set(c, this.budgets.budgetsOf(c.spec));
      dirty = true;
    }
    return dirty;
  }
}
