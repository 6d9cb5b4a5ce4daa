/**
 * No operator command reaches anything but this machine unless AWS was chosen (`--aws` /
 * `PACELINE_TARGET=aws`), whatever part of a local region's environment is set — and the target
 * line names every endpoint a command then uses.
 *
 * Each command runs as a real process (`npx paceline …`, `npm run budgets|dead-letters …`) with
 * `test/support/net-trap.mjs` preloaded: every TCP connection the process opens is recorded, and
 * every one to a host that is not loopback is refused before it leaves. An SDK client built
 * without an explicit endpoint goes to `<service>.<region>.amazonaws.com` (or, for credentials,
 * IMDS or STS) and shows up in the record whatever sent it there — a missing variable, the SDK's
 * own `AWS_ENDPOINT_URL*` reading, a profile in `~/.aws/config`. The home folder holds real-looking
 * credentials and a default region, as a developer's laptop does.
 *
 * Environments: each AWS_* variable alone; the full env file `npm start` writes; the env file
 * with real-looking credentials on top. Then with `--aws`: every connection goes to an endpoint
 * the target line named.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalRegion, startLocalRegion } from '../../../local/region.js';
import { runChild } from '../../support/child.js';
import { tempDir } from '../../support/tmp.js';

const root = fileURLToPath(new URL('../../..', import.meta.url));
const trapModule = pathToFileURL(join(root, 'test/support/net-trap.mjs')).href;

interface Connection {
  readonly host: string;
  readonly port: number;
  readonly allowed: boolean;
}

/** A loopback server that counts connections and closes them. */
async function countingServer(): Promise<{ server: Server; url: string; count: () => number }> {
  let n = 0;
  const server = createServer((socket) => {
    n++;
    socket.destroy();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return { server, url: `http://127.0.0.1:${port}`, count: () => n };
}

let region: LocalRegion;
/** Where `AWS_ENDPOINT_URL` (the SDK's global override) points: nothing may connect to it. */
let globalOverride: Awaited<ReturnType<typeof countingServer>>;
/** A loopback stand-in for an SQS endpoint (the local region has none). */
let sqsStandIn: Awaited<ReturnType<typeof countingServer>>;
let home: string;
/** An empty state folder: no running `npm start` to discover. */
let stateDir: string;

beforeAll(async () => {
  region = await startLocalRegion();
  globalOverride = await countingServer();
  sqsStandIn = await countingServer();
  home = tempDir('paceline-home-');
  mkdirSync(join(home, '.aws'));
  writeFileSync(
    join(home, '.aws', 'credentials'),
    '[default]\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n' +
      '[prod]\naws_access_key_id = AKIAI44QH8DHBEXAMPLE\naws_secret_access_key = je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY\n',
  );
  writeFileSync(
    join(home, '.aws', 'config'),
    '[default]\nregion = us-east-1\n[profile prod]\nregion = eu-west-1\n',
  );
  stateDir = tempDir('paceline-state-');
}, 60_000);

afterAll(async () => {
  await region?.stop();
  globalOverride?.server.close();
  sqsStandIn?.server.close();
});

const node = process.execPath;
const tsx = join(root, 'node_modules/tsx/dist/cli.mjs');
const paceline = (...args: string[]) => [join(root, 'cli/paceline.mjs'), ...args];
const alias = (file: string, ...args: string[]) => [tsx, join(root, 'cli', file), ...args];

/** Every command that builds a client, once per path that builds a different set. */
const commands: { readonly name: string; readonly argv: readonly string[] }[] = [
  { name: 'paceline status', argv: paceline('status', '--json') },
  { name: 'paceline spend status', argv: paceline('spend', 'status') },
  { name: 'paceline spend report', argv: paceline('spend', 'report') },
  {
    name: 'paceline leader-override',
    argv: paceline('leader-override', '--shard', '0', '--instance', 'auto'),
  },
  { name: 'paceline failover', argv: paceline('failover', '--region', 'us-east-1', '--to', 'us-west-2') },
  { name: 'paceline failback', argv: paceline('failback', '--region', 'us-east-1') },
  { name: 'paceline budgets account list', argv: paceline('budgets', 'account', 'list') },
  {
    name: 'paceline budgets account put',
    argv: paceline('budgets', 'account', 'put', '--id', 'trap', '--name', 'Trap', '--tz', 'UTC'),
  },
  { name: 'paceline reconcile', argv: paceline('reconcile', '--campaign', 'ghost') },
  { name: 'paceline dead-letters list', argv: paceline('dead-letters', 'list', '--json') },
  {
    name: 'paceline dead-letters replay',
    argv: paceline('dead-letters', 'replay', '--source', 'ingest-actions'),
  },
  {
    name: 'paceline dead-letters list --on-failure --from sqs',
    argv: paceline('dead-letters', 'list', '--on-failure', '--from', 'sqs', '--source', 'track-spend'),
  },
  {
    name: 'paceline dead-letters redrive --from sqs --dry-run',
    argv: paceline('dead-letters', 'redrive', '--from', 'sqs', '--dry-run', '--source', 'track-spend'),
  },
  {
    name: 'npm run budgets -- account put',
    argv: alias('budgets.ts', 'account', 'put', '--id', 'trap2', '--name', 'Trap', '--tz', 'UTC'),
  },
  {
    name: 'npm run dead-letters -- list --on-failure --from sqs',
    argv: alias('dead-letters.ts', 'list', '--on-failure', '--from', 'sqs', '--source', 'track-spend'),
  },
];

/** The environments: each AWS_* variable alone, the env file, the env file with real credentials. */
function environments(): { readonly name: string; readonly env: Record<string, string> }[] {
  const e = region.clientEnv;
  const realCredentials = {
    AWS_ACCESS_KEY_ID: 'ASIAQXYZEXAMPLE7KEY1',
    AWS_SECRET_ACCESS_KEY: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY',
    AWS_SESSION_TOKEN: 'IQoJb3JpZ2luX2VjEXAMPLETOKEN',
  };
  return [
    { name: 'AWS_REGION alone', env: { AWS_REGION: 'us-east-1' } },
    { name: 'AWS_DEFAULT_REGION alone', env: { AWS_DEFAULT_REGION: 'us-east-1' } },
    { name: 'AWS_PROFILE alone', env: { AWS_PROFILE: 'prod' } },
    { name: 'credentials alone', env: realCredentials },
    { name: 'AWS_ENDPOINT_URL alone', env: { AWS_ENDPOINT_URL: globalOverride.url } },
    {
      name: 'AWS_ENDPOINT_URL_DYNAMODB alone',
      env: { AWS_ENDPOINT_URL_DYNAMODB: e.AWS_ENDPOINT_URL_DYNAMODB as string },
    },
    {
      name: 'AWS_ENDPOINT_URL_KINESIS alone',
      env: { AWS_ENDPOINT_URL_KINESIS: e.AWS_ENDPOINT_URL_KINESIS as string },
    },
    { name: 'AWS_ENDPOINT_URL_SSM alone', env: { AWS_ENDPOINT_URL_SSM: e.AWS_ENDPOINT_URL_SSM as string } },
    { name: 'AWS_ENDPOINT_URL_S3 alone', env: { AWS_ENDPOINT_URL_S3: e.AWS_ENDPOINT_URL_S3 as string } },
    { name: 'AWS_ENDPOINT_URL_SQS alone', env: { AWS_ENDPOINT_URL_SQS: sqsStandIn.url } },
    {
      name: 'AWS_ENDPOINT_URL_ELASTICACHE alone',
      env: { AWS_ENDPOINT_URL_ELASTICACHE: e.AWS_ENDPOINT_URL_ELASTICACHE as string },
    },
    { name: 'the env file', env: { ...e, PACELINE_LOCAL_PID: String(process.pid) } },
    {
      name: 'the env file + real-looking credentials',
      env: { ...e, PACELINE_LOCAL_PID: String(process.pid), ...realCredentials, AWS_PROFILE: 'prod' },
    },
  ];
}

/** Runs a command with the trap; returns its outcome and every connection it opened. */
async function run(argv: readonly string[], extra: Record<string, string>) {
  const log = join(tempDir('paceline-trap-'), 'connections.jsonl');
  writeFileSync(log, '');
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    HOME: home,
    NODE_OPTIONS: `--import ${trapModule}`,
    NET_TRAP_LOG: log,
    PACELINE_STATE_DIR: stateDir,
    ...extra,
  };
  const result = await runChild(node, argv, { cwd: tempDir('paceline-cwd-'), env, timeoutMs: 90_000 });
  const connections = readFileSync(log, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Connection);
  const output = `${result.stdout}\n${result.stderr}`;
  const targetLine = output.split('\n').find((l) => /(^|: )Target: /.test(l));
  return { ...result, connections, targetLine };
}

/** host:port of every endpoint a target line names (URLs, and `redis h:p[,h:p]`). */
function namedEndpoints(line: string): Set<string> {
  const out = new Set<string>();
  for (const m of line.matchAll(/https?:\/\/[^\s,)]+/g)) {
    const url = new URL(m[0]);
    out.add(`${url.hostname}:${url.port || (url.protocol === 'https:' ? '443' : '80')}`);
  }
  for (const m of line.matchAll(/redis ([^\s;)]+)/g)) for (const n of (m[1] as string).split(',')) out.add(n);
  return out;
}

/** Runs `jobs` with at most `limit` at a time (two cores; each job is a process). */
async function pool<T>(jobs: readonly (() => Promise<T>)[], limit: number): Promise<T[]> {
  const results: T[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: limit }, async () => {
      while (next < jobs.length) {
        const i = next++;
        results[i] = await (jobs[i] as () => Promise<T>)();
      }
    }),
  );
  return results;
}

describe('operator commands never reach beyond loopback without --aws', () => {
  it('the trap sees an SDK client that falls back to its default endpoint (the test can fail)', async () => {
    const probe = join(tempDir('paceline-probe-'), 'probe.mjs');
    writeFileSync(
      probe,
      `import { SSMClient, GetParameterCommand } from ${JSON.stringify(pathToFileURL(join(root, 'node_modules/@aws-sdk/client-ssm/dist-cjs/index.js')).href)};\n` +
        "await new SSMClient({ region: 'us-east-1', maxAttempts: 1 }).send(new GetParameterCommand({ Name: 'x' })).catch(() => {});\n",
    );
    const r = await run([probe], { AWS_ACCESS_KEY_ID: 'AKIAEXAMPLE', AWS_SECRET_ACCESS_KEY: 'x' });
    expect(r.connections).toEqual([
      { pid: expect.any(Number), host: 'ssm.us-east-1.amazonaws.com', port: 443, allowed: false },
    ]);
  }, 60_000);

  it.each(commands)(
    '$name: with any partial local environment, connects only to loopback endpoints its target line names',
    async ({ argv }) => {
      const envs = environments();
      const results = await pool(
        envs.map((e) => () => run(argv, e.env)),
        3,
      );
      envs.forEach((e, i) => {
        const r = results[i] as Awaited<ReturnType<typeof run>>;
        const context = `${e.name}: exit ${r.code}\n${r.stdout}\n${r.stderr}\n${JSON.stringify(r.connections)}`;
        expect(
          r.connections.filter((c) => !c.allowed),
          context,
        ).toEqual([]);
        // Refused or done — never an unexpected failure, never a stack trace.
        expect(r.code, context).not.toBe(1);
        expect(r.stderr, context).not.toMatch(/\n\s+at /);
        if (r.connections.length > 0) {
          expect(r.targetLine, context).toBeDefined();
          const named = namedEndpoints(r.targetLine as string);
          for (const c of r.connections) expect([...named], context).toContain(`${c.host}:${c.port}`);
        }
        if (e.name === 'the env file' || e.name.startsWith('the env file +')) {
          // A complete local region: every command runs, except those needing what the region
          // does not have (an SQS on-failure queue: refused, naming the variable).
          if (argv.includes('sqs')) expect(r.stderr, context).toMatch(/AWS_ENDPOINT_URL_SQS unset/);
          else expect([0, 3], context).toContain(r.code);
        }
      });
      expect(globalOverride.count()).toBe(0);
    },
    600_000,
  );

  it.each(commands)(
    '$name --aws: every connection goes to an endpoint its target line names',
    async ({ argv }) => {
      const r = await run([...argv, '--aws'], {
        AWS_REGION: 'us-east-1',
        AWS_ACCESS_KEY_ID: 'AKIAIOSFODNN7EXAMPLE',
        AWS_SECRET_ACCESS_KEY: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY',
        REDIS_NODES_US_EAST_1: 'paceline-cache.abc123.clustercfg.use1.cache.amazonaws.com:6379',
        AWS_MAX_ATTEMPTS: '1',
      });
      const context = `exit ${r.code}\n${r.stdout}\n${r.stderr}\n${JSON.stringify(r.connections)}`;
      expect(r.targetLine, context).toMatch(/Target: AWS us-east-1 \(/);
      expect(r.connections.length, context).toBeGreaterThan(0);
      const named = namedEndpoints(r.targetLine as string);
      for (const c of r.connections) expect([...named], context).toContain(`${c.host}:${c.port}`);
      expect(r.code, context).toBe(6); // the trap refused every connection: unreachable, one line
    },
    120_000,
  );
});
