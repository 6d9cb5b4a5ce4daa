/**
 * A synthesized policy with one action removed, enforced on the real callers: the track-spend and
 * sweep-spend handlers in `npm start`'s process runtime (their own keys, from their environment),
 * and the ad-server client built from a region's client environment exactly as an ad server
 * builds it. The removed call is refused with AWS's error, the refusal is counted and logged, and
 * nothing it would have written lands. The client's read of the shard count from SSM is held to
 * whatever the synthesized ad-server policy says about it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalIam } from '../../../local/iam/gate.js';
import { principalId, withoutAction } from '../../../local/iam/policy.js';
import { type LocalRegion, localIam, startLocalRegion } from '../../../local/region.js';
import { type RegionRuntime, startRuntime } from '../../../local/runtime.js';
import { configFromEnv, createPacelineClient } from '../../../packages/client/src/index.js';
import { BudgetRepository } from '../../../shared/budget/repository.js';
import { dayWindow } from '../../../shared/budget/time-zone.js';
import { KinesisProducer, KinesisPutError } from '../../../shared/kinesis/producer.js';
import { pacerEnv, pacerShardsPath, parameterPrefix } from '../../../shared/region/resources.js';
import type { SpendEvent } from '../../../shared/spend/events.js';
import { SpendLedger } from '../../../shared/spend/ledger.js';
import { tempDir } from '../../support/tmp.js';
import { waitFor } from '../../support/wait.js';

/** Waits until `done()` holds (60 s). */
const until = (what: string, done: () => boolean) => waitFor(what, 60_000, () => (done() ? true : undefined));

import { encode, seedBudgets } from '../spend/support.js';

describe('handlers in the process runtime, one action removed from their synthesized policies', () => {
  let runtime: RegionRuntime;
  const lines: string[] = [];

  beforeAll(async () => {
    [runtime] = (await startRuntime({
      regions: ['us-east-1'],
      redisMode: 'standalone',
      stateDir: tempDir('paceline-iam-runtime-'),
      functions: ['trackSpend', 'sweepSpend'],
      functionOutput: 'ignore',
      logs: { dir: tempDir('paceline-iam-runtime-logs-'), console: 'compact' },
      // A schedule "minute" of 3 s (the pacer, not run here, needs ticks dividing it).
      msPerMinute: 3_000,
      pacer: { tickMs: 1_000, leaseTtlMs: 2_000 },
      iam: {
        edit: (set) =>
          withoutAction(
            withoutAction(set, principalId('us-east-1', 'track-spend'), 'dynamodb:PutItem'),
            principalId('us-east-1', 'sweep-spend'),
            'dynamodb:Query',
          ),
      },
      log: (line) => lines.push(line),
      alert: (line) => lines.push(line),
    })) as [RegionRuntime];
  }, 180_000);

  afterAll(async () => {
    if (process.env.DEBUG_RUNTIME) console.log(lines.join('\n'));
    await runtime?.stop();
  });

  it('track-spend cannot book a win: its ledger PutItem is refused, logged and counted; no ledger entry', async () => {
    const region = runtime.region;
    const repo = new BudgetRepository({
      client: region.dynamodb,
      tableName: region.tableName('budgets'),
      pacerShards: region.description.settings.pacer.shards,
    });
    await seedBudgets(repo, {
      accountId: 'acc-iam',
      timeZone: 'UTC',
      campaigns: [{ campaignId: 'c-iam', budgetMicros: 1_000_000_000 }],
    });
    const now = Date.now();
    const bid = {
      v: 1,
      bidId: 'iam-b1',
      campaignId: 'c-iam',
      bidAt: now - 1000,
      bidPriceMicros: 2_000,
    } as const;
    const events: SpendEvent[] = [
      { ...bid, type: 'bid' },
      { ...bid, type: 'win', at: now, clearingPriceMicros: 1_500 },
    ];
    const producer = new KinesisProducer({ client: region.kinesis, streamName: region.streamName('spend') });
    await producer.putAll(encode(events).map((data) => ({ data, partitionKey: 'c-iam' })));
    const ledgerArn = `arn:aws:dynamodb:us-east-1:000000000000:table/${region.tableName('spendLedger')}`;
    const iam = region.iam as LocalIam;
    await until('track-spend refused', () =>
      iam.refusals.some((r) => r.principal === 'us-east-1/track-spend' && r.action === 'dynamodb:PutItem'),
    );
    const refusal = iam.refusals.find((r) => r.principal === 'us-east-1/track-spend');
    expect(refusal).toMatchObject({ service: 'dynamodb', resource: ledgerArn });
    expect(refusal?.message).toMatch(
      /^User: arn:aws:sts::000000000000:assumed-role\/[^/]+\/paceline-track-spend is not authorized to perform: dynamodb:PutItem on resource: .* because no identity-based policy allows the dynamodb:PutItem action$/,
    );
    expect(lines).toContain(
      `[us-east-1] IAM refused us-east-1/track-spend: dynamodb:PutItem on ${ledgerArn} (dynamodb)`,
    );
    expect(iam.counts.get('us-east-1/track-spend')?.refused).toBeGreaterThanOrEqual(1);
    // Every other call of the record went through (budgets, the outbox intent): only the put failed.
    expect(iam.counts.get('us-east-1/track-spend')?.allowed).toBeGreaterThanOrEqual(1);
    const ledger = new SpendLedger({
      client: region.dynamodb,
      tableName: region.tableName('spendLedger'),
      region: 'us-east-1',
    });
    expect(await ledger.entries('c-iam', dayWindow(now, 'UTC').day)).toEqual([]);
    // The invocation reported the record as failed (retried): the error reached the handler.
    expect(lines.some((l) => l.includes('track-spend') && /failed item/.test(l))).toBe(true);
  }, 120_000);

  it('sweep-spend’s invocation fails with the AccessDenied error the SDK raised in the handler', async () => {
    const refused =
      /^\[us-east-1\] sweep-spend-schedule: \w+: User: arn:aws:sts::000000000000:assumed-role\/[^/]+\/paceline-sweep-spend is not authorized to perform: dynamodb:Query on resource: arn:aws:dynamodb:us-east-1:000000000000:table\/paceline-spend-ledger because no identity-based policy allows the dynamodb:Query action$/;
    await until('sweep-spend invoked and refused', () => lines.some((l) => refused.test(l)));
    expect(runtime.region.iam?.counts.get('us-east-1/sweep-spend')?.refused).toBeGreaterThanOrEqual(1);
  }, 60_000);
});

describe('the ad-server client, held to the synthesized ad-server policy', () => {
  let region: LocalRegion;
  let full: LocalIam;

  beforeAll(async () => {
    region = await startLocalRegion({ region: 'us-east-1' });
    full = region.iam as LocalIam;
  }, 120_000);

  afterAll(async () => {
    await region?.stop();
  });

  it('events the client puts are refused when PutRecords is removed, reported through onError; restored, they land', async () => {
    const iam = region.iam as LocalIam;
    const original = iam.policies;
    const errors: unknown[] = [];
    const client = await createPacelineClient(
      configFromEnv(region.clientEnv, { onError: (e) => errors.push(e), bidEvents: false }),
    );
    try {
      iam.setPolicies(withoutAction(original, principalId('us-east-1', 'ad-server'), 'kinesis:PutRecords'));
      const action = {
        userId: 42,
        timestamp: Date.now(),
        insertionId: crypto.randomUUID(),
        action: 'impression',
        ad: '1',
        adGroup: '2',
        campaign: '3',
        advertiser: '4',
      } as const;
      client.sendAction(action);
      await client.flush().catch(() => {});
      await until('the put failed', () => errors.length > 0);
      // The producer saw the SDK's AccessDeniedException (permanent: not retried).
      const put = errors.find((e): e is KinesisPutError => e instanceof KinesisPutError);
      expect(put?.code).toBe('AccessDeniedException');
      expect((put?.cause as Error | undefined)?.name).toBe('AccessDeniedException');
      expect(put?.message).toContain(
        'is not authorized to perform: kinesis:PutRecords on resource: arn:aws:kinesis:us-east-1:000000000000:stream/paceline-actions',
      );
      expect(
        iam.refusals.some((r) => r.principal === 'us-east-1/ad-server' && r.action === 'kinesis:PutRecords'),
      ).toBe(true);
      iam.setPolicies(original);
      const allowedBefore = iam.counts.get('us-east-1/ad-server')?.allowed ?? 0;
      client.sendAction({ ...action, insertionId: crypto.randomUUID() });
      await client.flush();
      expect(iam.counts.get('us-east-1/ad-server')?.allowed).toBeGreaterThan(allowedBefore);
    } finally {
      iam.setPolicies(original);
      await client.close();
    }
  }, 60_000);

  it('reads the shard count from SSM only if the synthesized ad-server policy allows it', async () => {
    const name = `${parameterPrefix('us-east-1')}${pacerShardsPath}`;
    const adServer = full.principalOf('local-us-east-1-ad-server');
    expect(adServer).toBeDefined();
    const decision = full.decide(
      adServer as NonNullable<typeof adServer>,
      { action: 'ssm:GetParameter', resource: `arn:aws:ssm:us-east-1:000000000000:parameter${name}` },
      'us-east-1',
    );
    const env = { ...region.clientEnv };
    delete env[pacerEnv.shards];
    const created = createPacelineClient(configFromEnv(env, { onError: () => {} }));
    if (decision.allowed) {
      const client = await created;
      expect(client.pacerShards).toBe(region.description.settings.pacer.shards);
      await client.close();
    } else {
      const error = await created.then(
        async (c) => {
          await c.close();
          throw new Error('the client read the shard count its policy does not allow');
        },
        (e: Error) => e,
      );
      expect(error.message).toContain(
        `ssm:GetParameter on resource: arn:aws:ssm:us-east-1:000000000000:parameter${name}`,
      );
    }
  }, 60_000);

  it('a region loads the policies synthesized for its runtime’s regions', async () => {
    const both = await localIam(['us-east-1', 'us-west-2'], region.description);
    expect(both.policies.synthesis.regions).toEqual(['us-east-1', 'us-west-2']);
    expect(both.policies.principals.map((p) => p.id)).toContain('us-west-2/pacer');
    expect(full.policies.synthesis.regions).toEqual(['us-east-1']);
  }, 180_000);
});
