/**
 * `npm run demo` as a user runs it (its own process): no local target → one line and exit 2;
 * against a local region it prints its target first, seeds the budgets, puts traffic on both
 * streams, reports progress and stops cleanly on SIGINT (pending notices sent, exit 0).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { GetRecordsCommand, GetShardIteratorCommand, ListShardsCommand } from '@aws-sdk/client-kinesis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalRegion, startLocalRegion } from '../../../local/region.js';
import { repoRoot } from '../../../local/worker/process-invoker.js';
import { BudgetRepository } from '../../../shared/budget/repository.js';
import { waitFor } from '../../support/wait.js';

let region: LocalRegion;

beforeAll(async () => {
  region = await startLocalRegion({ region: 'us-west-2' });
});
afterAll(async () => {
  await region?.stop();
});

/** Starts the demo; collects its output. */
function demo(
  args: string[],
  env: Record<string, string>,
): { child: ChildProcess; out: () => string; err: () => string } {
  let out = '';
  let err = '';
  const child = spawn(process.execPath, ['--import', 'tsx', 'local/demo/main.ts', ...args], {
    cwd: repoRoot,
    // Only what a fresh shell has, plus the region's env: nothing leaks in from the test runner.
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
  });
  child.stdout?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr?.on('data', (d: Buffer) => {
    err += d.toString();
  });
  return { child, out: () => out, err: () => err };
}

const exited = (child: ChildProcess) =>
  new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));

/** Records on a stream (every shard, from the start). */
async function streamRecords(stream: string): Promise<Buffer[]> {
  const name = region.streamName(stream as 'spend');
  const shards = await region.kinesis.send(new ListShardsCommand({ StreamName: name }));
  const out: Buffer[] = [];
  for (const s of shards.Shards ?? []) {
    const it = await region.kinesis.send(
      new GetShardIteratorCommand({
        StreamName: name,
        ShardId: s.ShardId,
        ShardIteratorType: 'TRIM_HORIZON',
      }),
    );
    const page = await region.kinesis.send(
      new GetRecordsCommand({ ShardIterator: it.ShardIterator, Limit: 10_000 }),
    );
    for (const r of page.Records ?? []) out.push(Buffer.from(r.Data ?? new Uint8Array()));
  }
  return out;
}

describe('npm run demo', () => {
  it('refuses to run without a local target: one line, exit 2, nothing touched', async () => {
    const d = demo([], { AWS_REGION: 'us-east-1' });
    expect(await exited(d.child)).toBe(2);
    const lines = d
      .err()
      .trim()
      .split('\n')
      .filter((l) => !/NodeVersionSupport|node|^\s*$|upgrade|a\.co|versions|updates/i.test(l));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^No local region in the environment: start the local regions \(npm start\)/);
    expect(d.out()).toBe('');
  });

  it('prints its target, seeds, drives both streams and stops cleanly on SIGINT', async () => {
    const d = demo(
      ['--rate', '50', '--poison-every', '1', '--report-every', '1', '--seed', '3'],
      region.clientEnv,
    );
    const code = exited(d.child);
    // Bids, not just requests: the guard says no-budget until its first leases arrive, which takes
    // a while on a loaded machine.
    await waitFor('bids', 120_000, () => /\d+ s: \d+ requests, [1-9]\d* bids/.test(d.out()) || undefined);
    expect(d.out().split('\n')[0]).toBe(
      `Target: local us-west-2 (dynamodb ${region.endpoints.dynamodb}, kinesis ${region.endpoints.kinesis}, redis standalone ${region.redis.nodesEnv})`,
    );
    await waitFor('a poison record', 60_000, () => / [1-9]\d* poison/.test(d.out()) || undefined);
    d.child.kill('SIGINT');
    expect(await code).toBe(0);
    expect(d.out()).toMatch(/Stopping: sending the pending notices, flushing the streams…\nStopped\. /);

    const repo = new BudgetRepository({ client: region.dynamodb, tableName: region.tableName('budgets') });
    expect((await repo.listAccounts()).map((a) => a.accountId).sort()).toEqual([
      'demo-acct-1',
      'demo-acct-2',
      'demo-acct-3',
    ]);
    const spend = (await streamRecords('spend')).map((b) => b.toString());
    const types = new Set(spend.map((s) => (JSON.parse(s) as { type: string }).type));
    expect(types).toContain('bid');
    // Wins and losses follow the bids (the pending ones were sent at stop).
    expect(types.has('win') || types.has('loss')).toBe(true);
    expect(spend.some((s) => s.includes('"clearingPriceMicros":-1000'))).toBe(true);
    expect((await streamRecords('actions')).length).toBeGreaterThan(0);
  }, 300_000);
});
