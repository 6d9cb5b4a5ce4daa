/**
 * How `npm start` ends. A Ctrl-C (SIGINT to the terminal's whole process group: npm, its shell,
 * the runner) prints one line per region and nothing that looks like a failure — no emulator
 * "died", no invocation cut short reported as an error — and exits 0, with invocations in flight.
 * A `kill -9` of the runner (the OOM killer) leaves no emulator or instance running within 5 s,
 * marks the env files stale, removes regions.json, and the next start on the same ports works.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { PutRecordsCommand } from '@aws-sdk/client-kinesis';
import { describe, expect, it } from 'vitest';
import { localRegionsFile } from '../../../cli/paceline/target.js';
import { envFilePath, readEnvFile, STALE_MARKER } from '../../../local/env-file.js';
import { repoRoot } from '../../../local/worker/process-invoker.js';
import { kinesisClient } from '../../../shared/aws/clients.js';
import { regionResources, resourceName } from '../../../shared/region/resources.js';
import { descendants, running } from '../../support/proc.js';
import { tempDir } from '../../support/tmp.js';

/** Collects a process's output; resolves `ready` at the runner's ready line. */
function watch(proc: ChildProcess) {
  let output = '';
  const onData = (chunk: Buffer) => {
    output += chunk.toString();
  };
  proc.stdout?.on('data', onData);
  proc.stderr?.on('data', onData);
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  const ready = (timeoutMs: number) =>
    new Promise<void>((resolve, reject) => {
      const deadline = Date.now() + timeoutMs;
      const poll = setInterval(() => {
        if (/Paceline local regions ready/.test(output)) {
          clearInterval(poll);
          resolve();
        } else if (Date.now() > deadline || proc.exitCode !== null) {
          clearInterval(poll);
          reject(new Error(`not ready within ${timeoutMs} ms; output:\n${output}`));
        }
      }, 100);
    });
  return { output: () => output, exited, ready };
}

const handlers = (module: string) =>
  Object.values(regionResources.functions).flatMap((f) => ['--handler', `${f.name}=${module}`]);

/** A base port whose region block (and cluster bus ports) is free now. */
async function freeBlock(): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const base = 20_000 + Math.floor(Math.random() * 20_000);
    const ports = Array.from({ length: 10 }, (_, i) => base + i);
    const free = await Promise.all(
      ports.map(
        (port) =>
          new Promise<boolean>((resolve) => {
            const s = createServer();
            s.once('error', () => resolve(false));
            s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
          }),
      ),
    );
    if (free.every(Boolean)) return base;
  }
  throw new Error('no free port block');
}

describe('npm start stops cleanly', () => {
  it('Ctrl-C: one line per region, nothing that looks like a failure, exit 0 — with invocations in flight', async () => {
    const stateDir = tempDir('paceline-ctrl-c-');
    // As a terminal runs it: `npm start` in its own process group, which the Ctrl-C signals whole.
    const proc = spawn(
      'npm',
      [
        'start',
        '--',
        '--base-port',
        '0',
        '--state-dir',
        stateDir,
        '--prewarm',
        ...handlers('test/fixtures/handlers/slow.ts'),
      ],
      {
        cwd: repoRoot,
        env: { ...process.env, POWERTOOLS_METRICS_DISABLED: 'true' },
        stdio: ['ignore', 'pipe', 'pipe'],
        detached: true,
      },
    );
    const run = watch(proc);
    try {
      await run.ready(60_000);
      // Records on every stream: the stream functions' (3 s) invocations are in flight at the stop.
      for (const region of ['us-east-1', 'us-west-2']) {
        const env = readEnvFile(envFilePath(stateDir, region));
        const kinesis = kinesisClient({ region, kinesis: env.AWS_ENDPOINT_URL_KINESIS as string });
        for (const stream of Object.values(regionResources.streams)) {
          await kinesis.send(
            new PutRecordsCommand({
              StreamName: resourceName(stream, env),
              Records: Array.from({ length: 20 }, (_, i) => ({
                Data: Buffer.from(`r${i}`),
                PartitionKey: `k${i}`,
              })),
            }),
          );
        }
        kinesis.destroy();
      }
      // Wait until the pollers handed the records over (the instances are busy for 3 s).
      await new Promise((r) => setTimeout(r, 2_500));
      const before = run.output().length;
      process.kill(-(proc.pid as number), 'SIGINT');
      const code = await run.exited;
      const after = run.output().slice(before);
      const lines = after.split('\n').filter((l) => l.trim() !== '');
      expect(code, after).toBe(0);
      expect(lines.sort(), after).toEqual([
        'us-east-1 stopped (in-memory state discarded)',
        'us-west-2 stopped (in-memory state discarded)',
      ]);
      expect(after).not.toMatch(/ERROR|Error|died|SIGINT|restart|failed|!!/);
    } finally {
      try {
        process.kill(-(proc.pid as number), 'SIGKILL');
      } catch {} // the group is gone already
    }
  }, 180_000);

  it('kill -9 of the runner: no emulator or instance left within 5 s, env file stale, the same ports start again', async () => {
    const stateDir = tempDir('paceline-kill9-');
    const base = await freeBlock();
    const args = [
      '--import',
      'tsx',
      'local/main.ts',
      '--regions',
      'us-east-1',
      '--prewarm',
      '--base-port',
      String(base),
      '--state-dir',
      stateDir,
      ...handlers('test/fixtures/handlers/echo.ts'),
    ];
    const start = () =>
      spawn(process.execPath, args, {
        cwd: repoRoot,
        env: { ...process.env, POWERTOOLS_METRICS_DISABLED: 'true' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
    const proc = start();
    const run = watch(proc);
    let again: ChildProcess | undefined;
    try {
      await run.ready(60_000);
      const children = descendants(proc.pid as number);
      const commands = [...children.values()];
      expect(
        commands.filter((c) => c.startsWith('redis-server')),
        commands.join('\n'),
      ).toHaveLength(1);
      expect(commands.filter((c) => c.includes('worker-entry')).length).toBeGreaterThanOrEqual(
        Object.keys(regionResources.functions).length,
      );
      expect(commands.filter((c) => c.includes('watchdog-process'))).toHaveLength(1);
      const envFile = envFilePath(stateDir, 'us-east-1');
      expect(readFileSync(envFile, 'utf8')).toContain(`PACELINE_LOCAL_PID='${proc.pid}'`);
      expect(existsSync(localRegionsFile(stateDir))).toBe(true);

      const killedAt = Date.now();
      process.kill(proc.pid as number, 'SIGKILL');
      await run.exited;
      let left = [...children.keys()].filter(running);
      while (left.length > 0 && Date.now() - killedAt < 5_000) {
        await new Promise((r) => setTimeout(r, 50));
        left = [...children.keys()].filter(running);
      }
      console.log(`kill -9: every child gone after ${Date.now() - killedAt} ms`);
      expect(left.map((p) => `${p} ${children.get(p)}`)).toEqual([]);
      expect(readFileSync(envFile, 'utf8').startsWith(STALE_MARKER)).toBe(true);
      expect(existsSync(localRegionsFile(stateDir))).toBe(false);

      // The next start on the same ports: nothing holds them.
      again = start();
      const second = watch(again);
      await second.ready(60_000);
      expect(second.output()).not.toMatch(/in use/);
      process.kill(again.pid as number, 'SIGINT');
      expect(await second.exited).toBe(0);
    } finally {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
      if (again && again.exitCode === null && again.signalCode === null) again.kill('SIGKILL');
    }
  }, 180_000);
});
