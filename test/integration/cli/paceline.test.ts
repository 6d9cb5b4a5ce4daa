/**
 * `paceline` commands against a real local region (dynalite, kinesalite, the SSM endpoint,
 * redis-server): exit codes and the `--json` shapes operators script against.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LeaderOverrideResult } from '../../../cli/paceline/leader-override.js';
import type { StatusReport } from '../../../cli/paceline/status.js';
import { EXIT, main } from '../../../cli/paceline.js';
import { type LocalRegion, startLocalRegion } from '../../../local/region.js';

let region: LocalRegion;
beforeAll(async () => {
  region = await startLocalRegion();
}, 60_000);
afterAll(async () => {
  await region?.stop();
});

async function run(argv: string[], env: Record<string, string | undefined> = region.clientEnv) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(argv, {
    out: (l) => out.push(l),
    err: (l) => err.push(l),
    env,
    now: () => Date.now(),
    repoRoot: '/nonexistent', // only the pasted Client env: never a developer's running npm start
  });
  return { code, out, err, json: () => JSON.parse(out.join('\n')) as unknown };
}

describe('paceline against a local region', () => {
  it('status --json: one object per region with publisher switch, shards, streams and dead letters', async () => {
    const r = await run(['status', '--json']);
    expect(r.code, r.err.join('\n')).toBe(EXIT.ok);
    expect(r.out).toHaveLength(1);
    expect(r.err[0]).toMatch(/^Target: local us-east-1/);
    const report = r.json() as StatusReport;
    const [east] = report.regions;
    expect(east?.region).toBe('us-east-1');
    expect(east?.publisher).toEqual({
      parameter: '/paceline/us-east-1/publisher-region',
      publisherRegion: 'us-east-1',
      version: 1,
      state: 'local',
    });
    expect(east?.shards.map((s) => s.shard)).toEqual([0, 1, 2, 3]);
    expect(east?.shards.every((s) => s.override === 'auto' && s.leader === null)).toBe(true);
    expect(east?.streams.map((s) => s.stream).sort()).toEqual(['paceline-actions', 'paceline-spend']);
    expect(east?.streams.every((s) => s.iteratorAgeMs === 0 && /kinesalite/.test(s.note))).toBe(true);
    expect(east?.deadLetters).toEqual({ 'ingest-actions': 0, 'track-spend': 0 });
  });

  it('status (human) prints the target first, then the table', async () => {
    const r = await run(['status']);
    expect(r.code).toBe(EXIT.ok);
    expect(r.out[0]).toMatch(/^Target: local us-east-1/);
    expect(r.out.join('\n')).toMatch(/publisher: us-east-1 \(local, version 1\)/);
  });

  it('leader-override sets and clears a shard override (visible in status), with --json shapes', async () => {
    const set = await run(['leader-override', '--shard', '1', '--instance', '2', '--json']);
    expect(set.code, set.err.join('\n')).toBe(EXIT.ok);
    expect(set.json()).toEqual({
      region: 'us-east-1',
      shard: 1,
      parameter: '/paceline/us-east-1/pacer/leader-override/1',
      previous: 'auto',
      override: 's1-i2',
      version: 2,
    } satisfies LeaderOverrideResult);
    const status = (await run(['status', '--json'])).json() as StatusReport;
    expect(status.regions[0]?.shards.find((s) => s.shard === 1)?.override).toBe('s1-i2');
    const back = await run(['leader-override', '--shard', '1', '--instance', 'auto', '--json']);
    expect((back.json() as LeaderOverrideResult).override).toBe('auto');
  });

  it('leader-override rejects a shard or instance outside the layout (exit 2, nothing written)', async () => {
    const shard = await run(['leader-override', '--shard', '4', '--instance', '0']);
    expect(shard.code).toBe(EXIT.usage);
    expect(shard.err.at(-1)).toMatch(/shards 0…3/);
    const inst = await run(['leader-override', '--shard', '0', '--instance', '3']);
    expect(inst.code).toBe(EXIT.usage);
    const wrong = await run(['leader-override', '--shard', '0', '--instance', 's1-i0']);
    expect(wrong.code).toBe(EXIT.usage);
    const status = (await run(['status', '--json'])).json() as StatusReport;
    expect(status.regions[0]?.shards.every((s) => s.override === 'auto')).toBe(true);
  });

  it('budgets and reconcile are delegated, with the budgets exit codes', async () => {
    const put = await run([
      'budgets',
      'account',
      'put',
      '--id',
      'acme',
      '--name',
      'Acme',
      '--tz',
      'UTC',
      '--json',
    ]);
    expect(put.code, put.err.join('\n')).toBe(EXIT.ok);
    expect(put.json()).toMatchObject({ accountId: 'acme' });
    const list = await run(['budgets', 'account', 'list', '--json']);
    expect(list.code).toBe(EXIT.ok);
    expect((list.json() as { accountId: string }[]).map((a) => a.accountId)).toContain('acme');
    const dup = await run([
      'budgets',
      'account',
      'put',
      '--id',
      'acme',
      '--name',
      'A',
      '--tz',
      'UTC',
      '--mode',
      'create',
    ]);
    expect(dup.code).toBe(EXIT.conflict);
    const missing = await run(['reconcile', '--campaign', 'nope']);
    expect(missing.code).toBe(EXIT.notFound);
    const bad = await run(['budgets', 'account', 'put', '--id', 'x', '--name', 'X', '--tz', 'Mars/Olympus']);
    expect(bad.code).toBe(EXIT.usage);
    expect(bad.err.at(-1)?.split('\n')).toHaveLength(1);
  });

  it('dead-letters list is delegated (--json: an array)', async () => {
    const r = await run(['dead-letters', 'list', '--source', 'track-spend', '--json']);
    expect(r.code, r.err.join('\n')).toBe(EXIT.ok);
    expect(r.json()).toEqual([]);
  });

  it('usage errors: unknown command, unknown flag, a region that is not the target', async () => {
    expect((await run(['fly'])).code).toBe(EXIT.usage);
    expect((await run(['status', '--bogus'])).code).toBe(EXIT.usage);
    const other = await run(['status', '--regions', 'eu-west-1']);
    expect(other.code).toBe(EXIT.usage);
    expect(other.err).toHaveLength(1);
  });

  it('a store that cannot be reached exits 6 in one line', async () => {
    const r = await run(['status'], {
      ...region.clientEnv,
      AWS_ENDPOINT_URL_DYNAMODB: 'http://127.0.0.1:9',
      AWS_ENDPOINT_URL_SSM: 'http://127.0.0.1:9',
    });
    expect(r.code).toBe(EXIT.unreachable);
    expect(r.err.at(-1)).toMatch(/could not reach a store/);
  });
});
