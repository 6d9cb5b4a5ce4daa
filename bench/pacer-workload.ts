/**
 * The pacer benchmark's shard: account ids that hash to it and its budget items as the shard index
 * returns them (bench/pacer.ts and the single-pacer memory measurement, bench/pacer-memory.ts).
 */
import type { BudgetItem } from '../shared/budget/repository.js';
import type { PacingController } from '../shared/pacing/controller/api.js';
import { createPacingController } from '../shared/pacing/controller/index.js';
import { createLinearController } from '../shared/pacing/controller/linear.js';
import { pacerShardKey, shardOfAccount } from '../shared/pacing/shard.js';

/** The shard the benchmark paces. */
export const SHARD = 0;
/** Shards of the layout (the default). */
export const SHARDS = 24;
/** Campaigns per account. */
export const CAMPAIGNS_PER_ACCOUNT = 10;
/** One campaign in ARM_EVERY has two experiment arms. */
export const ARM_EVERY = 5;
/** Time zones of the accounts, in turn. */
export const ZONES = ['America/New_York', 'America/Los_Angeles', 'Europe/Berlin', 'Asia/Tokyo', 'UTC'];

/** Account ids that hash to the benchmark's shard (readers find their keys as in production). */
export function shardAccounts(count: number): string[] {
  const out: string[] = [];
  for (let i = 0; out.length < count; i++)
    if (shardOfAccount(`acct-${i}`, SHARDS) === SHARD) out.push(`acct-${i}`);
  return out;
}

/** The shard's budget items as the index would return them. */
export function budgetItems(accountIds: readonly string[], campaigns: number, now: number): BudgetItem[] {
  const items: BudgetItem[] = [];
  const pacerShard = pacerShardKey(SHARD, SHARDS);
  // Written over past days: each incremental query re-reads only the last minute's changes.
  let written = now - 86_400_000;
  const stamp = () => {
    written -= 1000;
    return { version: 1, updatedAt: written, pacerShard };
  };
  for (let a = 0; a < accountIds.length; a++) {
    const accountId = accountIds[a] as string;
    items.push({
      ...stamp(),
      pk: `ACCOUNT#${accountId}`,
      sk: 'ACCOUNT',
      type: 'account',
      accountId,
      name: accountId,
      timeZone: ZONES[a % ZONES.length],
      currency: 'USD',
    });
    items.push({
      ...stamp(),
      pk: `ACCOUNT#${accountId}`,
      sk: 'PLAN#account',
      type: 'plan',
      level: 'account',
      accountId,
      dailyBudgetMicros: 5_000_000_000,
      pacingMode: 'even',
    });
  }
  for (let c = 0; c < campaigns; c++) {
    const accountId = accountIds[Math.floor(c / CAMPAIGNS_PER_ACCOUNT)] as string;
    const campaignId = `camp-${c}`;
    items.push({
      ...stamp(),
      pk: `CAMPAIGN#${campaignId}`,
      sk: 'CAMPAIGN',
      type: 'campaign',
      campaignId,
      accountId,
      name: campaignId,
      status: 'active',
    });
    items.push({
      ...stamp(),
      pk: `CAMPAIGN#${campaignId}`,
      sk: 'PLAN#campaign',
      type: 'plan',
      level: 'campaign',
      accountId,
      campaignId,
      dailyBudgetMicros: 200_000_000 + (c % 97) * 1_000_000,
      pacingMode: c % 10 === 0 ? 'asap' : 'even',
    });
    if (c % ARM_EVERY === 0) {
      for (const armId of ['A', 'B']) {
        items.push({
          ...stamp(),
          pk: `CAMPAIGN#${campaignId}`,
          sk: `PLAN#arm:${armId}`,
          type: 'plan',
          level: 'arm',
          accountId,
          campaignId,
          armId,
          dailyBudgetMicros: 80_000_000,
          pacingMode: 'even',
        });
      }
    }
  }
  return items;
}

/**
 * The linear baseline with a throttle that moves every tick: what a feedback controller publishes
 * (every plan's `p:` field changes each tick; curves stay), to measure the write volume of the
 * steady state of a real controller with the baseline's compute cost.
 */
function changingController(): PacingController<unknown, unknown> {
  const linear = createLinearController() as PacingController<unknown, unknown>;
  return {
    ...linear,
    name: 'linear, throttle changing every tick',
    step(input, previous, forecast) {
      const out = linear.step(input, previous, forecast);
      const throttle = 0.5 + 0.4 * Math.abs(Math.sin(input.nowMs / 10_000 + input.plan.dailyBudgetMicros));
      return { ...out, params: { ...out.params, throttle } };
    },
  };
}

/** The controller `--controller` names: `default` (the shipped one), `linear` or `changing`. */
export function benchController(name: string): PacingController<unknown, unknown> {
  if (name === 'linear') return createLinearController() as PacingController<unknown, unknown>;
  if (name === 'changing') return changingController();
  return createPacingController();
}
