/**
 * `budgets rehome --plan <plan> --region <region>` (also `paceline budgets rehome …`): moves a
 * plan's allocation authority to another region of the deployment (docs/pacing.md, "Home loss and
 * rehome") — what an operator does when the plan's home region is lost or cut off (the alarm
 * AllocationAuthorityAge fires, and regions stop at their lease). Writes `allocHome`,
 * `allocFence` = fence + 1 and `allocSettleUntil` = now + 2 × replication lag + 2 ticks,
 * conditional on the fence it read: the new home grants nothing before the settle time (every
 * region's report of what it applied has replicated), and a concurrent rehome loses.
 *
 * Refused with one line and nothing written: a plan given in another form than `spend status`
 * shows it, a region name that is not one, a region outside the deployment (`PACELINE_REGIONS`),
 * the region that is home already, a rehome still settling (usage, exit 2); a plan that does not
 * exist (3); a rehome that lost the race (4).
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { getPlan, type PlanRef, rehomePlan } from '../shared/budget/allocation-home.js';
import { BudgetNotFoundError, type BudgetRepository } from '../shared/budget/repository.js';
import { intEnv } from '../shared/config/env.js';
import { allocationSettingsFromEnv, homeOf } from '../shared/pacing/regions/allocation-config.js';
import { defaultShareConfig } from '../shared/pacing/regions/shares.js';
import { TICK_MS } from '../shared/pacing/types.js';
import { CliUsageError } from './common.js';

/** What a rehome wrote. */
export interface RehomeResult {
  readonly plan: string;
  readonly previousHome: string;
  readonly home: string;
  readonly fence: number;
  /** The new home grants nothing before this instant (epoch ms). */
  readonly settleUntil: number;
}

const ID = '[A-Za-z0-9_.-]{1,64}';
const REGION_NAME = /^[a-z]{2}(-gov)?-[a-z]+-\d{1,2}$/;

/** Parses `--plan` as `spend status` and the dashboard show a plan (`<scope>:<planId>`). */
export function parsePlanRef(value: string): {
  level: 'account' | 'campaign' | 'arm';
  id: string;
  armId?: string;
} {
  const campaign = new RegExp(`^c:(${ID}):campaign$`).exec(value);
  if (campaign) return { level: 'campaign', id: campaign[1] as string };
  const arm = new RegExp(`^c:(${ID}):arm:(${ID})$`).exec(value);
  if (arm) return { level: 'arm', id: arm[1] as string, armId: arm[2] as string };
  const account = new RegExp(`^a:(${ID}):account$`).exec(value);
  if (account) return { level: 'account', id: account[1] as string };
  throw new CliUsageError(
    `--plan ${JSON.stringify(value)}: give the plan as spend status shows it: c:<campaign>:campaign, c:<campaign>:arm:<arm> or a:<account>:account.`,
  );
}

/** Runs `rehome` against the budgets table of the target region. */
export async function rehome(options: {
  readonly plan: string | undefined;
  readonly region: string | undefined;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly repo: BudgetRepository;
  readonly dynamodb: DynamoDBClient;
  readonly tableName: string;
  readonly now: number;
}): Promise<RehomeResult> {
  if (!options.plan)
    throw new CliUsageError('--plan is required (as spend status shows it, e.g. c:spring:campaign).');
  if (!options.region)
    throw new CliUsageError('--region is required: the region to move the allocation authority to.');
  const ref = parsePlanRef(options.plan);
  const region = options.region;
  if (!REGION_NAME.test(region)) {
    throw new CliUsageError(`--region ${JSON.stringify(region)} is not a region name (like us-west-2).`);
  }
  const { regions } = allocationSettingsFromEnv(undefined, options.env);
  if (regions.length < 2) {
    throw new CliUsageError(
      'Allocations need several regions: set PACELINE_REGIONS to the deployment’s regions (the local regions of npm start set it).',
    );
  }
  if (!regions.includes(region)) {
    throw new CliUsageError(`--region ${region} is not a region of this deployment (${regions.join(', ')}).`);
  }
  let accountId = ref.id;
  if (ref.level !== 'account') {
    const campaign = await options.repo.getCampaign(ref.id);
    if (!campaign) throw new BudgetNotFoundError(`Campaign ${ref.id} does not exist.`);
    accountId = campaign.accountId;
  }
  const key: PlanRef = {
    level: ref.level,
    accountId,
    ...(ref.level === 'account' ? {} : { campaignId: ref.id }),
    ...(ref.armId === undefined ? {} : { armId: ref.armId }),
  };
  const table = { client: options.dynamodb, tableName: options.tableName };
  const stored = await getPlan(table, key);
  if (!stored) throw new BudgetNotFoundError(`Plan ${options.plan} does not exist.`);
  const home = homeOf(stored, { regions });
  if (home === region)
    throw new CliUsageError(`${region} is already the home of ${options.plan}: nothing to move.`);
  const settle = stored.allocSettleUntil ?? 0;
  if (options.now < settle) {
    throw new CliUsageError(
      `${options.plan} was rehomed to ${home} and settles until ${new Date(settle).toISOString()}: run again after that.`,
    );
  }
  const fence = stored.allocFence ?? 0;
  // Every region's last report of what it applied replicates to the new home within this.
  const tickMs = intEnv('PACER_TICK_MS', TICK_MS, options.env);
  const settleUntil = options.now + 2 * defaultShareConfig.maxReplicationLagMs + 2 * tickMs;
  await rehomePlan(table, key, region, fence, settleUntil, options.now);
  return { plan: options.plan, previousHome: home, home: region, fence: fence + 1, settleUntil };
}
