/**
 * `npm start` as a developer runs it (the tsx CLI, real processes): it writes
 * `.paceline/<region>.env`; sourcing that file in bash gives a complete client environment that
 * reaches every store (DynamoDB, Kinesis, SSM, S3, Redis); each invocation is one compact console
 * line and the instance's output goes to its own log file; `kill -9` of the region's
 * redis-server is reported on stderr and the server comes back on the same port; on stop the env
 * file turns stale (sourcing it unsets the variables and returns 1).
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { ListStreamsCommand, PutRecordCommand } from '@aws-sdk/client-kinesis';
import { ListBucketsCommand } from '@aws-sdk/client-s3';
import { GetParametersByPathCommand } from '@aws-sdk/client-ssm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readEnvFile } from '../../../local/env-file.js';
import { repoRoot } from '../../../local/worker/process-invoker.js';
import { dynamoDbClient, endpointsFromEnv, kinesisClient, ssmClient } from '../../../shared/aws/clients.js';
import { s3Client } from '../../../shared/aws/ops-clients.js';
import { connectRedis, redisConfigFromEnv } from '../../../shared/redis/connect.js';
import { parameterPrefix, physicalName, regionResources } from '../../../shared/region/resources.js';
import { tempDir } from '../../support/tmp.js';

const stateDir = tempDir('paceline-envfile-');
const envFile = join(stateDir, 'us-east-1.env');
let proc: ChildProcess;
let stdout = '';
let stderr = '';

async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      if (await check()) return;
    } catch {}
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${what}\nstdout:\n${stdout}\nstderr:\n${stderr}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The environment a bash shell has after `source <file>`, minus what it had before. */
function sourced(file: string): { env: Record<string, string>; status: number; stderr: string } {
  const run = spawnSync('bash', ['-c', `source '${file}'; s=$?; env -0; exit $s`], {
    env: { PATH: process.env.PATH ?? '', REDIS_NODES: 'before' },
    encoding: 'utf8',
  });
  const env: Record<string, string> = {};
  for (const entry of run.stdout.split('\0')) {
    const eq = entry.indexOf('=');
    if (eq > 0) env[entry.slice(0, eq)] = entry.slice(eq + 1);
  }
  return { env, status: run.status ?? -1, stderr: run.stderr };
}

beforeAll(async () => {
  const echo = 'test/fixtures/handlers/echo.ts';
  const handlers = Object.values(regionResources.functions).flatMap((f) => [
    '--handler',
    `${f.name}=${f.name === 'track-spend' ? 'test/fixtures/handlers/chatty.ts' : echo}`,
  ]);
  proc = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      'local/main.ts',
      '--regions',
      'us-east-1',
      '--base-port',
      '0',
      '--state-dir',
      stateDir,
      '--no-bundle',
      ...handlers,
    ],
    {
      cwd: repoRoot,
      env: { ...process.env, POWERTOOLS_METRICS_DISABLED: 'true' },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  proc.stdout?.on('data', (c: Buffer) => {
    stdout += c.toString();
  });
  proc.stderr?.on('data', (c: Buffer) => {
    stderr += c.toString();
  });
  await until('the ready line', () => stdout.includes('Paceline local regions ready'), 60_000);
}, 90_000);

afterAll(() => {
  if (proc && proc.exitCode === null) proc.kill('SIGKILL');
});

describe('the env file of npm start', () => {
  it('is complete and, sourced in bash, reaches every store', async () => {
    expect(stdout).toContain(`source ${envFile}`);
    const { env, status } = sourced(envFile);
    expect(status).toBe(0);
    for (const name of [
      'AWS_REGION',
      'AWS_DEFAULT_REGION',
      'AWS_ENDPOINT_URL_DYNAMODB',
      'AWS_ENDPOINT_URL_KINESIS',
      'AWS_ENDPOINT_URL_SSM',
      'AWS_ENDPOINT_URL_S3',
      'AWS_ACCESS_KEY_ID',
      'AWS_SECRET_ACCESS_KEY',
      'REDIS_NODES',
      'REDIS_MODE',
      'REDIS_TLS',
      'PACER_SHARDS',
    ]) {
      expect(env[name], name).toMatch(/\S/);
    }
    expect(env.AWS_REGION).toBe('us-east-1');
    expect(env.AWS_DEFAULT_REGION).toBe('us-east-1');
    expect(env.REDIS_MODE).toBe('standalone');
    // The runner's own pid (tsx runs it as a child of the launcher we spawned).
    expect(readFileSync(`/proc/${env.PACELINE_LOCAL_PID}/cmdline`, 'utf8')).toContain('local/main.ts');
    // The parser for tools reads the same values bash does.
    const parsed = readEnvFile(envFile);
    for (const [k, v] of Object.entries(parsed)) expect(env[k], k).toBe(v);

    const endpoints = endpointsFromEnv(env);
    const dynamodb = dynamoDbClient(endpoints);
    const kinesis = kinesisClient(endpoints);
    const ssm = ssmClient(endpoints);
    const s3 = s3Client(endpoints);
    const redis = connectRedis(redisConfigFromEnv(env));
    try {
      const tables = (await dynamodb.send(new ListTablesCommand({}))).TableNames;
      expect(tables).toEqual(
        expect.arrayContaining(Object.values(regionResources.tables).map((t) => physicalName(t.suffix))),
      );
      const streams = (await kinesis.send(new ListStreamsCommand({}))).StreamNames;
      expect(streams).toEqual(
        expect.arrayContaining(Object.values(regionResources.streams).map((s) => physicalName(s.suffix))),
      );
      const params = await ssm.send(
        new GetParametersByPathCommand({ Path: parameterPrefix('us-east-1'), Recursive: true }),
      );
      expect(params.Parameters?.length).toBeGreaterThan(0);
      const buckets = (await s3.send(new ListBucketsCommand({}))).Buckets?.map((b) => b.Name);
      expect(buckets).toEqual(
        expect.arrayContaining(Object.values(regionResources.buckets).map((b) => physicalName(b.suffix))),
      );
      expect(await redis.ping()).toBe('PONG');
    } finally {
      for (const c of [dynamodb, kinesis, ssm, s3]) c.destroy();
      redis.disconnect();
    }
  });

  it('prints one compact line per invocation and keeps the instance output in its log file', async () => {
    const env = readEnvFile(envFile);
    const kinesis = kinesisClient(endpointsFromEnv(env));
    try {
      await kinesis.send(
        new PutRecordCommand({
          StreamName: physicalName(regionResources.streams.spend.suffix),
          Data: Buffer.from('{}'),
          PartitionKey: 'p',
        }),
      );
    } finally {
      kinesis.destroy();
    }
    await until('the invocation line', () =>
      /\[us-east-1\] track-spend #\d+ {2}1 record {2}\d+(\.\d)? m?s {2}ok/.test(stdout),
    );
    const pid = /\[us-east-1\] track-spend #(\d+) {2}1 record/.exec(stdout)?.[1];
    const file = join(stateDir, 'logs', 'us-east-1', `track-spend-${pid}.log`);
    await until(
      'the log file',
      () => existsSync(file) && readFileSync(file, 'utf8').includes('chatty saw shardId-'),
    );
    // The instance's output is in its file, not on the console (compact mode).
    expect(stdout).not.toContain('chatty saw');
    expect(readdirSync(join(stateDir, 'logs', 'us-east-1')).every((f) => /^[a-z-]+-\d+\.log$/.test(f))).toBe(
      true,
    );
  });

  it('reports a kill -9 of redis-server on stderr and brings it back on the same port', async () => {
    const env = readEnvFile(envFile);
    const port = (env.REDIS_NODES ?? '').split(':')[1] as string;
    const pid = Number(
      execFileSync(
        'bash',
        ['-c', `ss -Hltnp 'sport = :${port}' | grep -o 'pid=[0-9]*' | head -1 | cut -d= -f2`],
        { encoding: 'utf8' },
      ).trim(),
    );
    expect(readFileSync(`/proc/${pid}/cmdline`, 'utf8')).toMatch(/^redis-server/);
    process.kill(pid, 'SIGKILL');
    await until('the restart line', () => stderr.includes('restarted'));
    const lines = stderr.split('\n').filter((l) => l.includes('redis-server'));
    expect(lines[0]).toContain(
      `[us-east-1] !! redis-server (pid ${pid}) at 127.0.0.1:${port} died (signal SIGKILL); restarting it on the same port`,
    );
    expect(lines[1]).toMatch(
      /redis-server at 127\.0\.0\.1:\d+ restarted: pid \d+, empty: live spend counters are rebuilt from the ledger/,
    );
    const redis = connectRedis(redisConfigFromEnv(env));
    try {
      expect(await redis.ping()).toBe('PONG');
    } finally {
      redis.disconnect();
    }
  });

  it('turns stale when the runner stops: sourcing it unsets the variables and returns 1', async () => {
    const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
    // SIGINT to the runner itself, as Ctrl-C delivers it to the whole process group: tsx's own
    // relay SIGKILLs a child that does not confirm within 30 ms, which a loaded machine misses.
    const runnerPid = Number(readEnvFile(envFile).PACELINE_LOCAL_PID);
    process.kill(runnerPid, 'SIGINT');
    expect(await exited).toBe(0);
    const { env, status, stderr: err } = sourced(envFile);
    expect(status).toBe(1);
    expect(env.REDIS_NODES).toBeUndefined();
    expect(env.AWS_ENDPOINT_URL_DYNAMODB).toBeUndefined();
    expect(err).toContain('the local region us-east-1 is not running');
    expect(() => readEnvFile(envFile)).toThrow(/stale/);
  });
});
