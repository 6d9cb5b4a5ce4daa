/** Shared helpers of the spend integration tests: seeded randomness, Kinesis-shaped batches, budgets. */
import type { KinesisStreamEvent, KinesisStreamRecord } from 'aws-lambda';
import type { BudgetRepository } from '../../../shared/budget/repository.js';
import { encodeSpendEvent, type SpendEvent } from '../../../shared/spend/events.js';
import { testContext, testKinesisRecord } from '../../support/lambda.js';

export { prng as rng, shuffle } from '../../../shared/random/prng.js';

/** A Kinesis record carrying `data`. */
export function kinesisRecord(data: Buffer, partitionKey: string): KinesisStreamRecord {
  return testKinesisRecord(data, { partitionKey, functionName: 'track-spend' });
}

/** Kinesis batches of at most `size` records. */
export function batches(data: readonly Buffer[], size: number, partitionKey = 'spend'): KinesisStreamEvent[] {
  const out: KinesisStreamEvent[] = [];
  for (let i = 0; i < data.length; i += size) {
    out.push({ Records: data.slice(i, i + size).map((d) => kinesisRecord(d, partitionKey)) });
  }
  return out;
}

/** Encodes events. */
export const encode = (events: readonly SpendEvent[]) => events.map((e) => encodeSpendEvent(e));

/** A Lambda context for invoking handlers in-process. */
export const lambdaContext = testContext('track-spend');

/** Creates an account with an account plan and campaigns with campaign plans (+ arm plans). */
export async function seedBudgets(
  repo: BudgetRepository,
  spec: {
    accountId: string;
    timeZone: string;
    accountBudgetMicros?: number;
    campaigns: {
      campaignId: string;
      budgetMicros: number;
      pacingMode?: 'even' | 'asap';
      arms?: Record<string, number>;
    }[];
  },
): Promise<void> {
  await repo.putAccount({
    accountId: spec.accountId,
    name: spec.accountId,
    timeZone: spec.timeZone,
    currency: 'USD',
  });
  if (spec.accountBudgetMicros !== undefined) {
    await repo.putPlan({
      level: 'account',
      accountId: spec.accountId,
      dailyBudgetMicros: spec.accountBudgetMicros,
      pacingMode: 'asap',
    });
  }
  for (const c of spec.campaigns) {
    await repo.putCampaign({
      campaignId: c.campaignId,
      accountId: spec.accountId,
      name: c.campaignId,
      status: 'active',
    });
    await repo.putPlan({
      level: 'campaign',
      accountId: spec.accountId,
      campaignId: c.campaignId,
      dailyBudgetMicros: c.budgetMicros,
      pacingMode: c.pacingMode ?? 'asap',
    });
    for (const [armId, budget] of Object.entries(c.arms ?? {})) {
      await repo.putPlan({
        level: 'arm',
        accountId: spec.accountId,
        campaignId: c.campaignId,
        armId,
        dailyBudgetMicros: budget,
        pacingMode: 'asap',
      });
    }
  }
}
