/**
 * `paceline spend status [--account A] [--campaign C] [--day YYYY-MM-DD] [--json]`: per plan-day,
 * what the live counters hold — confirmed, in flight, leased to guards, remaining — and the target
 * E(t) now: the pacer's published curve when its parameters are fresh, else the linear fail-safe
 * curve the guards fall back to (docs/spend.md, "Spend status"). Read-only.
 *
 * `spendStatus(...)` is the reusable part (tests call it against a local region); the command
 * resolves targets and prints like every `paceline` command.
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { dynamoDbClient, ssmClient } from '../shared/aws/clients.js';
import type { CampaignBudgets, ResolvedPlan } from '../shared/budget/model.js';
import { BudgetRepository } from '../shared/budget/repository.js';
import { type DayWindow, dayWindow, dayWindowOf, parseDay } from '../shared/budget/time-zone.js';
import { resolvePacerShards } from '../shared/pacing/control.js';
import { PacingReader, publishedCurve } from '../shared/pacing/reader.js';
import { connectRedis, type RedisClient } from '../shared/redis/connect.js';
import { regionResources, resourceName } from '../shared/region/resources.js';
import { planDayKeys } from '../shared/spend/keys.js';
import { readPlanDay } from '../shared/spend/live-counters.js';
import { CliNotFoundError, CliUsageError } from './common.js';
import { type RegionTarget, redisOf } from './paceline/target.js';

/** One plan-day's figures (integer micros). */
export interface PlanDayStatus {
  readonly accountId: string;
  /** Unset for account plans (they span the account's campaigns). */
  readonly campaignId?: string;
  /** `account`, `campaign` or `arm:<armId>`. */
  readonly plan: string;
  /** The advertiser's local day. */
  readonly day: string;
  readonly pacingMode: 'even' | 'asap';
  readonly budgetMicros: number;
  /** False: nothing is initialised in Redis for the day yet (no spend, or a reset not rebuilt). */
  readonly initialised: boolean;
  readonly confirmedMicros: number;
  readonly inFlightMicros: number;
  readonly leasedMicros: number;
  /** budget − confirmed − in flight − leased, never below 0. */
  readonly remainingMicros: number;
  /** E(t) at `atMs`, never above the budget. */
  readonly targetMicros: number;
  /** `published`: the pacer's fresh curve; `linear`: the fail-safe curve (parameters stale or absent). */
  readonly targetSource: 'published' | 'linear';
  readonly atMs: number;
}

/** What to report. */
export interface SpendStatusOptions {
  readonly dynamodb: DynamoDBClient;
  readonly redis: RedisClient;
  /** @default the region description's name */
  readonly budgetsTable?: string;
  /** The region's pacer shard count N (to find published parameters). */
  readonly shards: number;
  readonly nowMs: number;
  /** Only this account's plans. */
  readonly accountId?: string;
  /** Only this campaign's plans (and its account's plan). */
  readonly campaignId?: string;
  /** The advertiser-local day. @default today in each account's time zone */
  readonly day?: string;
}

/** Reads the status of every plan-day selected by the options. */
export async function spendStatus(options: SpendStatusOptions): Promise<PlanDayStatus[]> {
  const { redis, nowMs } = options;
  if (options.day !== undefined) parseDay(options.day);
  const repo = new BudgetRepository({
    client: options.dynamodb,
    tableName: options.budgetsTable ?? resourceName(regionResources.tables.budgets, {}),
  });
  const campaigns: CampaignBudgets[] = [];
  if (options.campaignId !== undefined) {
    const b = await repo.getCampaignBudgets(options.campaignId);
    if (!b) throw new CliNotFoundError(`Campaign ${options.campaignId} (or its account) does not exist.`);
    if (options.accountId !== undefined && b.account.accountId !== options.accountId) {
      throw new CliUsageError(`Campaign ${options.campaignId} belongs to account ${b.account.accountId}.`);
    }
    campaigns.push(b);
  } else {
    const known = (await repo.listAccounts()).map((a) => a.accountId);
    if (options.accountId !== undefined && !known.includes(options.accountId))
      throw new CliNotFoundError(`Account ${options.accountId} does not exist.`);
    const accounts = options.accountId === undefined ? known : [options.accountId];
    for (const accountId of accounts) {
      for (const id of await repo.listCampaignIds(accountId)) {
        const b = await repo.getCampaignBudgets(id);
        if (b) campaigns.push(b);
      }
    }
  }
  // The reader the ad servers use, so the target is exactly the E(t) their guards enforce.
  const reader = new PacingReader({ redis, clock: { now: () => nowMs }, shards: options.shards });
  await reader.prefetch(
    campaigns.map((b) => ({ accountId: b.account.accountId, campaignId: b.campaign.campaignId })),
  );
  const curve = publishedCurve(reader);
  const plans = new Map<string, { plan: ResolvedPlan; window: DayWindow }>();
  for (const b of campaigns) {
    const window =
      options.day === undefined
        ? dayWindow(nowMs, b.account.timeZone)
        : dayWindowOf(options.day, b.account.timeZone);
    for (const plan of [...b.common, ...b.arms.values()]) {
      plans.set(planDayKeys(plan, window.day).state, { plan, window });
    }
  }
  const out: PlanDayStatus[] = [];
  for (const [key, { plan, window }] of plans) {
    const live = await readPlanDay(redis, key, nowMs);
    const initialised = live.epoch !== undefined;
    const confirmed = initialised ? live.confirmedMicros : 0;
    const inFlight = initialised ? live.inFlightMicros : 0;
    const leased = initialised ? live.leasedMicros : 0;
    out.push({
      accountId: plan.accountId,
      ...(plan.level === 'account' ? {} : { campaignId: plan.campaignId as string }),
      plan: plan.planId,
      day: window.day,
      pacingMode: plan.pacingMode,
      budgetMicros: plan.dailyBudgetMicros,
      initialised,
      confirmedMicros: confirmed,
      inFlightMicros: inFlight,
      leasedMicros: leased,
      remainingMicros: Math.max(0, plan.dailyBudgetMicros - confirmed - inFlight - leased),
      targetMicros: curve.expectedMicros(plan, window, nowMs),
      targetSource: reader.freshPlan(plan, window) ? 'published' : 'linear',
      atMs: nowMs,
    });
  }
  return out.sort(
    (a, b) =>
      a.accountId.localeCompare(b.accountId) ||
      (a.campaignId ?? '').localeCompare(b.campaignId ?? '') ||
      a.plan.localeCompare(b.plan),
  );
}

const dollars = (micros: number) => (micros / 1e6).toFixed(2);

/** The human-readable table (amounts in currency units). */
export function formatSpendStatus(
  regions: readonly { region: string; plans: readonly PlanDayStatus[] }[],
): string {
  const lines: string[] = [];
  for (const r of regions) {
    lines.push(r.region);
    if (r.plans.length === 0) {
      lines.push('  (no plans)');
      continue;
    }
    lines.push(
      '  account        campaign       plan         day         budget     confirmed  in-flight  leased     remaining  target E(t)',
    );
    for (const p of r.plans) {
      const cells = [
        p.accountId.padEnd(13),
        (p.campaignId ?? '-').padEnd(13),
        p.plan.padEnd(11),
        p.day.padEnd(10),
        dollars(p.budgetMicros).padStart(10),
        dollars(p.confirmedMicros).padStart(10),
        dollars(p.inFlightMicros).padStart(9),
        dollars(p.leasedMicros).padStart(9),
        dollars(p.remainingMicros).padStart(10),
        `${dollars(p.targetMicros).padStart(10)} (${p.targetSource})${p.initialised ? '' : '  not initialised'}`,
      ];
      lines.push(`  ${cells.join('  ')}`);
    }
  }
  return lines.join('\n');
}

/** Per target region, the plan-days of the selection (what `paceline spend status` prints). */
export async function readSpendStatus(
  targets: readonly RegionTarget[],
  selection: { readonly accountId?: string; readonly campaignId?: string; readonly day?: string },
  nowMs: number,
): Promise<{ region: string; plans: PlanDayStatus[] }[]> {
  const regions = [];
  for (const t of targets) {
    const timeouts = { connectionTimeoutMs: 2_000, requestTimeoutMs: 5_000, maxAttempts: 2 };
    const dynamodb = dynamoDbClient(t.endpoints, timeouts);
    const ssm = ssmClient(t.endpoints, timeouts);
    const redis = connectRedis(redisOf(t), {
      maxRetriesPerRequest: 1,
      redisOptions: { connectTimeout: 3_000 },
    });
    redis.on('error', () => {});
    try {
      const plans = await spendStatus({
        dynamodb,
        redis,
        budgetsTable: resourceName(regionResources.tables.budgets, t.env),
        shards: await resolvePacerShards(t.env, ssm, t.region),
        nowMs,
        ...selection,
      });
      regions.push({ region: t.region, plans });
    } finally {
      redis.disconnect();
      dynamodb.destroy();
      ssm.destroy();
    }
  }
  return regions;
}
