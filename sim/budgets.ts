/**
 * A scenario's budgets: the items of the `budgets` table a pacer shard's index would return (what
 * the pacer reads through its `ShardBudgets` cache; with several regions, every region's, as the
 * global table replicates them at once — budget edits are rare and their lag is not what these
 * scenarios measure) and each campaign's `CampaignBudgets` as the ad servers and track-spend hold
 * them. Both engines (`sim/runner.ts`, `sim/regions/engine.ts`) keep their budgets here.
 */
import type { ClosedFlightDay } from '../shared/budget/flight.js';
import { type Account, type CampaignBudgets, campaignBudgets } from '../shared/budget/model.js';
import type { BudgetItem } from '../shared/budget/repository.js';
import type { PacingMode } from '../shared/pacing/modes.js';
import { pacerShardKey } from '../shared/pacing/shard.js';
import type { Scenario, ScenarioCampaign } from './scenario.js';

type Mode = PacingMode;

/** The scenario's budget items and plans, edited as budget changes apply. */
export class ScenarioBudgets {
  private readonly items = new Map<string, BudgetItem>();
  private readonly accounts: Map<string, Account>;
  private readonly accountBudget: Map<string, number | undefined>;
  private readonly campaignBudget = new Map<string, number>();
  private readonly armBudget = new Map<string, number>();
  /** Closed flight days per campaign. */
  private readonly flightSpent = new Map<string, Record<string, ClosedFlightDay>>();
  private version = 0;

  constructor(
    private readonly scenario: Scenario,
    /** `asap` for the ASAP strategy: every plan in asap mode. */
    private readonly modeOf: (m: Mode) => Mode,
    shard: number,
    shards: number,
  ) {
    this.pacerShard = pacerShardKey(shard, shards);
    this.accounts = new Map(
      scenario.accounts.map((a) => [
        a.id,
        { accountId: a.id, name: a.id, timeZone: a.timeZone, currency: 'USD' } satisfies Account,
      ]),
    );
    this.accountBudget = new Map(scenario.accounts.map((a) => [a.id, a.budgetMicros]));
    for (const c of scenario.campaigns) {
      this.campaignBudget.set(c.id, c.budgetMicros);
      for (const arm of c.arms) this.armBudget.set(`${c.id}/${arm.id}`, arm.budgetMicros);
    }
  }

  private readonly pacerShard: string;

  /** The pacer's source: the items changed since `sinceMs` (the shard index's answer). */
  readonly source = async (sinceMs: number) => ({
    items: [...this.items.values()].filter((i) => i.updatedAt >= sinceMs),
  });

  /** The advertiser time zone of a campaign. */
  timeZoneOf(c: ScenarioCampaign): string {
    return (this.accounts.get(c.accountId) as Account).timeZone;
  }

  /** Writes a campaign's items (and its account's) as of `now`; returns its budgets. */
  activate(c: ScenarioCampaign, now: number): CampaignBudgets {
    this.putAccount(c.accountId, now);
    this.putCampaign(c, now);
    return this.budgetsOf(c);
  }

  /** Applies a budget change; returns the campaigns whose budgets changed. */
  change(ch: Scenario['budgetChanges'][number], now: number): ScenarioCampaign[] {
    if (ch.campaignId === undefined) {
      this.accountBudget.set(ch.accountId, ch.budgetMicros);
      this.putAccount(ch.accountId, now);
      return this.scenario.campaigns.filter((c) => c.accountId === ch.accountId);
    }
    const c = this.scenario.campaigns.find((x) => x.id === ch.campaignId) as ScenarioCampaign;
    if (ch.armId === undefined) this.campaignBudget.set(c.id, ch.budgetMicros);
    else this.armBudget.set(`${c.id}/${ch.armId}`, ch.budgetMicros);
    this.putCampaign(c, now);
    return [c];
  }

  /** The campaign's budgets now (account, campaign and arm plans). */
  budgetsOf(c: ScenarioCampaign): CampaignBudgets {
    const account = this.accounts.get(c.accountId) as Account;
    const spec = this.scenario.accounts.find((a) => a.id === c.accountId);
    const plans: Parameters<typeof campaignBudgets>[2][number][] = [this.campaignPlan(c)];
    const ab = this.accountBudget.get(c.accountId);
    if (ab !== undefined)
      plans.push({
        level: 'account',
        accountId: c.accountId,
        dailyBudgetMicros: ab,
        pacingMode: this.modeOf(spec?.pacingMode ?? 'even'),
      });
    for (const arm of c.arms) plans.push(this.armPlan(c, arm));
    return campaignBudgets(
      account,
      { campaignId: c.id, accountId: c.accountId, name: c.id, status: 'active' },
      plans,
    );
  }

  /** The campaign's own plan as it stands (its budget after every change so far, its flight's closes). */
  private campaignPlan(c: ScenarioCampaign) {
    return {
      level: 'campaign',
      accountId: c.accountId,
      campaignId: c.id,
      dailyBudgetMicros: this.campaignBudget.get(c.id) as number,
      pacingMode: this.modeOf(c.pacingMode),
      ...(c.flight ? { flight: c.flight, flightSpent: { ...this.flightSpent.get(c.id) } } : {}),
      ...(c.daypart ? { daypart: c.daypart } : {}),
      ...(c.curve ? { curve: c.curve } : {}),
    } as const;
  }

  /**
   * Records a closed flight day of campaign `c` (what the flight closer writes on the plan item:
   * docs/spend.md, "Flights") as of `now`.
   */
  closeFlightDay(c: ScenarioCampaign, day: string, micros: number, now: number): void {
    const closed = this.flightSpent.get(c.id) ?? {};
    closed[day] = { micros, at: now };
    this.flightSpent.set(c.id, closed);
    this.putCampaign(c, now);
  }

  /** An arm's plan as it stands. */
  private armPlan(c: ScenarioCampaign, arm: ScenarioCampaign['arms'][number]) {
    return {
      level: 'arm',
      accountId: c.accountId,
      campaignId: c.id,
      armId: arm.id,
      dailyBudgetMicros: this.armBudget.get(`${c.id}/${arm.id}`) as number,
      pacingMode: this.modeOf(arm.pacingMode),
    } as const;
  }

  private put(item: Omit<BudgetItem, 'version' | 'updatedAt' | 'pacerShard'>, now: number): void {
    this.version++;
    this.items.set(`${item.pk}|${item.sk}`, {
      ...item,
      version: this.version,
      updatedAt: now,
      pacerShard: this.pacerShard,
    } as BudgetItem);
  }

  private putAccount(accountId: string, now: number): void {
    const a = this.scenario.accounts.find((x) => x.id === accountId);
    if (!a) return;
    this.put(
      {
        pk: `ACCOUNT#${a.id}`,
        sk: 'ACCOUNT',
        type: 'account',
        accountId: a.id,
        name: a.id,
        timeZone: a.timeZone,
        currency: 'USD',
      },
      now,
    );
    const budget = this.accountBudget.get(a.id);
    if (budget !== undefined)
      this.put(
        {
          pk: `ACCOUNT#${a.id}`,
          sk: 'PLAN#account',
          type: 'plan',
          level: 'account',
          accountId: a.id,
          dailyBudgetMicros: budget,
          pacingMode: this.modeOf(a.pacingMode),
        },
        now,
      );
  }

  private putCampaign(c: ScenarioCampaign, now: number): void {
    this.put(
      {
        pk: `CAMPAIGN#${c.id}`,
        sk: 'CAMPAIGN',
        type: 'campaign',
        campaignId: c.id,
        accountId: c.accountId,
        name: c.id,
        status: 'active',
      },
      now,
    );
    this.put({ pk: `CAMPAIGN#${c.id}`, sk: 'PLAN#campaign', type: 'plan', ...this.campaignPlan(c) }, now);
    for (const arm of c.arms)
      this.put(
        { pk: `CAMPAIGN#${c.id}`, sk: `PLAN#arm:${arm.id}`, type: 'plan', ...this.armPlan(c, arm) },
        now,
      );
  }
}
