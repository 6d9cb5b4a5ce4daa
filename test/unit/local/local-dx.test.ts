/**
 * The pure parts of the local developer experience: env file text (quoting, stale marker),
 * the compact invocation line, the stable port layout, supervision lines, file checkpoints.
 */
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { formatSupervisionEvent, restartDelayMs } from '../../../local/emulators/supervision.js';
import { readEnvFile, renderEnvFile, renderStaleEnvFile } from '../../../local/env-file.js';
import { FileCheckpointStore } from '../../../local/esm/checkpoints.js';
import { failedItemsOf, formatInvocation, recordsOf } from '../../../local/logs.js';
import { DEFAULT_BASE_PORT, MAX_STABLE_REGIONS, regionPorts } from '../../../local/region.js';
import { tempDir } from '../../support/tmp.js';

describe('env file', () => {
  const env = { AWS_REGION: 'us-east-1', ODD: `it's "quoted" $HOME \`x\`` };

  it('round-trips any value through bash and through readEnvFile', () => {
    const file = join(tempDir('envfile-'), 'r.env');
    // The runner's pid must be alive for the file to source: this test process stands in.
    writeFileSync(file, renderEnvFile('us-east-1', env, process.pid));
    expect(readEnvFile(file)).toEqual({ ...env, PACELINE_LOCAL_PID: String(process.pid) });
    const out = spawnSync('bash', ['-c', `source '${file}' && printf %s "$ODD"`], { encoding: 'utf8' });
    expect(out.stdout).toBe(env.ODD);
  });

  it('a live file whose runner is gone (killed with its watchdog, or a reboot) refuses to source', () => {
    const file = join(tempDir('envfile-'), 'r.env');
    const gone = spawnSync(process.execPath, ['-e', 'console.log(process.pid)'], { encoding: 'utf8' });
    const pid = Number(gone.stdout.trim());
    writeFileSync(file, renderEnvFile('us-east-1', env, pid));
    const out = spawnSync(
      'bash',
      ['-c', `export AWS_REGION=x; source '${file}'; echo "rc=$? r=\${AWS_REGION-unset} odd=\${ODD-unset}"`],
      { encoding: 'utf8' },
    );
    expect(out.stdout.trim()).toBe('rc=1 r=x odd=unset'); // nothing exported
    expect(out.stderr).toContain(`the local region us-east-1 is not running (runner pid ${pid} is gone)`);
  });

  it('stale: sourcing unsets and returns 1; readEnvFile refuses it; a missing file says how to start', () => {
    const dir = tempDir('envfile-');
    const file = join(dir, 'r.env');
    writeFileSync(file, renderStaleEnvFile('us-east-1', Object.keys(env), 'runner pid 1 stopped'));
    const out = spawnSync(
      'bash',
      ['-c', `export AWS_REGION=x; source '${file}'; echo "rc=$? r=\${AWS_REGION-unset}"`],
      {
        encoding: 'utf8',
      },
    );
    expect(out.stdout.trim()).toBe('rc=1 r=unset');
    expect(out.stderr).toContain('not running (runner pid 1 stopped); start it with npm start');
    expect(() => readEnvFile(file)).toThrow(/stale/);
    expect(() => readEnvFile(join(dir, 'missing.env'))).toThrow(/npm start/);
  });
});

describe('compact invocation line', () => {
  it('names function, instance, records, duration and outcome; points failures at the log file', () => {
    const base = {
      functionName: 'track-spend',
      pid: 7,
      records: 200,
      durationMs: 84.2,
      ok: true,
      failedItems: 0,
    };
    expect(formatInvocation('us-east-1', base)).toBe('[us-east-1] track-spend #7  200 records  84 ms  ok');
    expect(formatInvocation('us-east-1', { ...base, records: 1, failedItems: 1 }, '/l/t.log')).toBe(
      '[us-east-1] track-spend #7  1 record  84 ms  1 failed item (retried)  → /l/t.log',
    );
    expect(
      formatInvocation(
        'us-west-2',
        {
          ...base,
          records: undefined,
          durationMs: 30_000,
          ok: false,
          errorType: 'Sandbox.Timedout',
          errorMessage: 'a\nb',
        },
        '/l/p.log',
      ),
    ).toBe('[us-west-2] track-spend #7  scheduled  30.0 s  ERROR Sandbox.Timedout: a  → /l/p.log');
  });

  it('reads records and batch item failures defensively', () => {
    expect(recordsOf({ Records: [1, 2] })).toBe(2);
    expect(recordsOf({ detail: {} })).toBeUndefined();
    expect(recordsOf(null)).toBeUndefined();
    expect(failedItemsOf({ batchItemFailures: [{ itemIdentifier: '1' }] })).toBe(1);
    expect(failedItemsOf(null)).toBe(0);
    expect(failedItemsOf({ batchItemFailures: 'x' })).toBe(0);
  });
});

describe('stable ports', () => {
  it('gives each region its own block; cluster takes three Redis ports', () => {
    expect(regionPorts(45100, 0, 'standalone')).toEqual({
      redis: [45100],
      dynamodb: 45105,
      kinesis: 45106,
      ssm: 45107,
      s3: 45108,
      elasticache: 45109,
    });
    const west = regionPorts(45100, 1, 'cluster');
    expect(west).toEqual({
      redis: [45110, 45111, 45112],
      dynamodb: 45115,
      kinesis: 45116,
      ssm: 45117,
      s3: 45118,
      elasticache: 45119,
    });
    const all = [regionPorts(45100, 0, 'cluster'), west].flatMap((p) => [
      ...p.redis,
      p.dynamodb,
      p.kinesis,
      p.ssm,
      p.s3,
      p.elasticache,
    ]);
    expect(new Set(all).size).toBe(all.length);
  });
});

describe('supervision lines', () => {
  it('say what died and what happens next', () => {
    expect(
      formatSupervisionEvent('us-east-1', {
        type: 'died',
        component: 'redis-server (pid 9)',
        address: '127.0.0.1:45100',
        reason: 'signal SIGKILL',
      }),
    ).toBe(
      '[us-east-1] !! redis-server (pid 9) at 127.0.0.1:45100 died (signal SIGKILL); restarting it on the same port',
    );
    expect(
      formatSupervisionEvent('us-east-1', {
        type: 'restart-failed',
        component: 'redis-server',
        address: '127.0.0.1:45100',
        error: 'no PING',
        retryInMs: 5_000,
      }),
    ).toContain('could not be restarted (no PING); retrying in 5 s');
    expect([0, 1, 2, 3, 4, 5, 50].map(restartDelayMs)).toEqual([
      0, 1_000, 2_000, 5_000, 10_000, 30_000, 30_000,
    ]);
  });
});

describe('FileCheckpointStore', () => {
  it('survives a new instance on the same file and never moves backwards', async () => {
    const file = join(tempDir('ckpt-'), 'sub', 'track-spend.json');
    const a = new FileCheckpointStore(file);
    await a.set('shardId-000000000000', '49590');
    await a.set('shardId-000000000000', '49600');
    const b = new FileCheckpointStore(file);
    expect(await b.get('shardId-000000000000')).toBe('49600');
    expect(await b.get('shardId-000000000001')).toBeUndefined();
    await expect(b.set('shardId-000000000000', '49500')).rejects.toThrow(/backwards/);
  });

  it('keeps the default layout (cluster bus ports included) below the Linux ephemeral range', () => {
    // A default port inside 32768–60999 is sometimes held by an outgoing connection of some other
    // process, and `npm start` would refuse to start (a CI run once hit "port 45106 is in use").
    const ports = Array.from({ length: MAX_STABLE_REGIONS }, (_, i) =>
      regionPorts(DEFAULT_BASE_PORT, i, 'cluster'),
    ).flatMap((p) => [
      ...p.redis,
      ...p.redis.map((r) => r + 10_000),
      p.dynamodb,
      p.kinesis,
      p.ssm,
      p.s3,
      p.elasticache,
    ]);
    expect(Math.min(...ports)).toBeGreaterThanOrEqual(1024);
    expect(Math.max(...ports)).toBeLessThan(32_768);
    expect(new Set(ports).size).toBe(ports.length);
  });
});
