/** Shared helpers of the spend integration tests: seeded randomness, Kinesis-shaped batches, budgets. */
import type { Context, KinesisStreamEvent, KinesisStreamRecord } from 'aws-lambda';
import type { BudgetRepository } from '../../../shared/budget/repository.js';
import { encodeSpendEvent, type SpendEvent } from '../../../shared/spend/events.js';

/** Deterministic PRNG (mulberry32): a failing run can be replayed from its seed. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Fisher–Yates shuffle with the given PRNG. */
export function shuffle<T>(items: readonly T[], random: () => number): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}

let seq = 10_000;

/** A Kinesis record carrying `data`. */
export function kinesisRecord(data: Buffer, partitionKey: string): KinesisStreamRecord {
  seq++;
  return {
    eventID: `shardId-000000000000:${seq}`,
    eventName: 'aws:kinesis:record',
    eventSource: 'aws:kinesis',
    eventSourceARN: 'arn:aws:kinesis:us-east-1:000000000000:stream/paceline-spend',
    eventVersion: '1.0',
    invokeIdentityArn: 'arn:aws:iam::000000000000:role/track-spend',
    awsRegion: 'us-east-1',
    kinesis: {
      kinesisSchemaVersion: '1.0',
      partitionKey,
      sequenceNumber: String(seq),
      data: data.toString('base64'),
      approximateArrivalTimestamp: Date.now() / 1000,
    },
  };
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
export const lambdaContext = {
  functionName: 'track-spend',
  functionVersion: '$LATEST',
  invokedFunctionArn: 'arn:aws:lambda:us-east-1:000000000000:function:track-spend',
  memoryLimitInMB: '1024',
  awsRequestId: 'test-request',
  logGroupName: '/aws/lambda/track-spend',
  logStreamName: 'local',
  callbackWaitsForEmptyEventLoop: false,
  getRemainingTimeInMillis: () => 60_000,
  done: () => {},
  fail: () => {},
  succeed: () => {},
} as Context;

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
