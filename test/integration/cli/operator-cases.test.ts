/**
 * The operator cases that confused a new user, against two real local regions: negative and zero
 * budgets, one target line, not-found exit codes (3, as docs/runbook.md says), unknown dead-letter
 * reasons, reconcile without Redis settings, `dead-letters list` without `--source`, and `status`
 * from one region's env file showing every region of its `npm start`.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ZERO_BUDGET_NOTE } from '../../../cli/budgets.js';
import type { StatusReport } from '../../../cli/paceline/status.js';
import { type LocalRegionsFile, localRegionsFile } from '../../../cli/paceline/target.js';
import { EXIT, main } from '../../../cli/paceline.js';
import { type LocalRegion, startLocalRegion } from '../../../local/region.js';
import { DeadLetterStore } from '../../../shared/quarantine/dead-letter-store.js';
import { tempDir } from '../../support/tmp.js';

let east: LocalRegion;
let west: LocalRegion;
/** A state folder whose regions.json names both regions, as a running `npm start` writes it. */
const stateDir = tempDir('paceline-operator-');

beforeAll(async () => {
  [east, west] = await Promise.all([
    startLocalRegion({ region: 'us-east-1' }),
    startLocalRegion({ region: 'us-west-2' }),
  ]);
  writeFileSync(
    localRegionsFile(stateDir),
    JSON.stringify({
      pid: process.pid, // alive for the whole test: the "runner"
      regions: [east, west].map((r) => ({ region: r.region, clientEnv: r.clientEnv })),
    } satisfies LocalRegionsFile),
  );
  const letters = new DeadLetterStore({ client: east.dynamodb, tableName: east.tableName('deadLetters') });
  for (const source of ['ingest-actions', 'track-spend']) {
    await letters.put({
      source,
      shardId: 'shardId-000000000000',
      sequenceNumber: source === 'track-spend' ? '2' : '1',
      partitionKey: 'k',
      data: Buffer.from('nope'),
      reasonCode: source === 'track-spend' ? 'spend.not-json' : 'counting.wrong-length',
      reason: 'bad record',
      arrivedAt: 1_763_700_000_000,
      quarantinedAt: 1_763_700_000_100,
    });
  }
}, 90_000);
afterAll(async () => {
  await Promise.all([east?.stop(), west?.stop()]);
});

/** `east`'s env file, sourced in a shell beside that `npm start`. */
const eastEnv = () => ({ ...east.clientEnv, PACELINE_STATE_DIR: stateDir });

async function run(argv: string[], env: Record<string, string | undefined> = eastEnv()) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(argv, {
    out: (l) => out.push(l),
    err: (l) => err.push(l),
    env,
    now: () => Date.now(),
    repoRoot: '/nonexistent',
  });
  return { code, out, err, json: () => JSON.parse(out.join('\n')) as unknown };
}

const plan = ['budgets', 'plan', 'put', '--level', 'campaign', '--account', 'acme', '--campaign', 'spring'];

describe('operator cases', () => {
  it('budgets: a negative budget is refused with the right message (also without "="), 0 is accepted and explained', async () => {
    await run(['budgets', 'account', 'put', '--id', 'acme', '--name', 'Acme', '--tz', 'UTC']);
    await run(['budgets', 'campaign', 'put', '--id', 'spring', '--account', 'acme', '--name', 'Spring']);
    for (const args of [
      ['--daily-budget', '-5'],
      ['--daily-budget=-5'],
      ['--daily-budget', '-0.5'],
      ['--daily-budget-micros', '-5000000'],
    ]) {
      const r = await run([...plan, ...args]);
      expect(r.code, args.join(' ')).toBe(EXIT.usage);
      expect(r.err.at(-1), args.join(' ')).toMatch(/cannot be negative/);
      expect(r.err.join('\n')).not.toMatch(/ambiguous/);
    }
    const zero = await run([...plan, '--daily-budget', '0', '--json']);
    expect(zero.code, zero.err.join('\n')).toBe(EXIT.ok);
    expect(zero.json()).toMatchObject({ dailyBudgetMicros: 0, note: ZERO_BUDGET_NOTE });
    expect(ZERO_BUDGET_NOTE).toMatch(/spends nothing/);
    expect(ZERO_BUDGET_NOTE).toMatch(/--status paused/);
    const human = await run([...plan, '--daily-budget', '10']);
    expect(human.out.join('\n')).not.toMatch(/note:/); // only a zero budget carries the note
  });

  it('prints the target line once, naming every endpoint the command uses', async () => {
    for (const argv of [
      ['budgets', 'account', 'list'],
      ['budgets', 'account', 'put', '--id', 'acme', '--name', 'Acme', '--tz', 'UTC'],
      ['dead-letters', 'list'],
      ['reconcile', '--campaign', 'spring'],
    ]) {
      const r = await run(argv);
      const lines = [...r.out, ...r.err].filter((l) => /Target: /.test(l));
      expect(lines, argv.join(' ')).toHaveLength(1);
      expect(lines[0]).toContain(`dynamodb ${east.endpoints.dynamodb}`);
    }
    const reconcile = await run(['reconcile', '--campaign', 'spring']);
    expect(reconcile.err.find((l) => /Target: /.test(l))).toContain(`redis ${east.redis.nodesEnv}`);
  });

  it('a missing account or campaign exits 3 (not found) everywhere', async () => {
    for (const argv of [
      ['spend', 'status', '--account', 'ghost'],
      ['spend', 'status', '--campaign', 'ghost'],
      ['reconcile', '--campaign', 'ghost'],
    ]) {
      const r = await run(argv);
      expect(r.code, `${argv.join(' ')}: ${r.err.join('\n')}`).toBe(EXIT.notFound);
      expect(r.err.at(-1)).toMatch(/ghost.*does not exist/);
    }
  });

  it('dead-letters: an unknown --reason is refused with the known ones; list without --source lists every function', async () => {
    const bad = await run(['dead-letters', 'list', '--reason', 'nope']);
    expect(bad.code).toBe(EXIT.usage);
    expect(bad.err.at(-1)).toMatch(
      /--reason "nope" is not a reason code of ingest-actions or track-spend: one of .*spend\.not-json/,
    );
    const typo = await run([
      'dead-letters',
      'list',
      '--source',
      'track-spend',
      '--reason',
      'counting.wrong-length',
    ]);
    expect(typo.code).toBe(EXIT.usage); // a real code, of the other function
    const all = await run(['dead-letters', 'list', '--json']);
    expect(all.code, all.err.join('\n')).toBe(EXIT.ok);
    expect(
      (all.json() as { source: string; reasonCode: string }[]).map((l) => [l.source, l.reasonCode]),
    ).toEqual([
      ['ingest-actions', 'counting.wrong-length'],
      ['track-spend', 'spend.not-json'],
    ]);
    const one = await run(['dead-letters', 'list', '--reason', 'spend.not-json', '--json']);
    expect((one.json() as { source: string }[]).map((l) => l.source)).toEqual(['track-spend']);
    const replay = await run(['dead-letters', 'replay']);
    expect(replay.code).toBe(EXIT.usage); // a write names its function
    expect(replay.err.at(-1)).toMatch(/replay needs --source/);
  });

  it('reconcile with empty REDIS_* is a usage error naming the variables, not a failure about a function', async () => {
    const r = await run(['reconcile', '--campaign', 'spring'], {
      ...eastEnv(),
      REDIS_NODES: '',
      REDIS_MODE: '',
    });
    expect(r.code).toBe(EXIT.usage);
    expect(r.err.at(-1)).toMatch(/REDIS_NODES, REDIS_MODE unset/);
    expect(r.err.join('\n')).not.toMatch(/function's environment/);
  });

  it("status from one region's env file shows every region of its npm start; one-region commands stay on it", async () => {
    const all = await run(['status', '--json']);
    expect(all.code, all.err.join('\n')).toBe(EXIT.ok);
    expect((all.json() as StatusReport).regions.map((r) => r.region)).toEqual(['us-east-1', 'us-west-2']);
    const spend = await run(['spend', 'status', '--json']);
    expect((spend.json() as { regions: { region: string }[] }).regions.map((r) => r.region)).toEqual([
      'us-east-1',
      'us-west-2',
    ]);
    const filtered = await run(['status', '--json', '--regions', 'us-west-2']);
    expect((filtered.json() as StatusReport).regions.map((r) => r.region)).toEqual(['us-west-2']);
    const list = await run(['budgets', 'account', 'list', '--json']);
    expect(list.err[0]).toMatch(/^Target: local us-east-1 /);
    // An env that is not that runner's (another local setup on other ports): only its own region.
    const other = { ...eastEnv(), AWS_ENDPOINT_URL_KINESIS: 'http://127.0.0.1:1' };
    const own = await run(['status', '--json'], other);
    expect((own.json() as StatusReport).regions.map((r) => r.region)).toEqual(['us-east-1']);
  });
});

describe('state folder', () => {
  it('regions.json lives in the state folder (PACELINE_STATE_DIR, else .paceline)', () => {
    expect(localRegionsFile(stateDir)).toBe(join(stateDir, 'regions.json'));
  });
});
