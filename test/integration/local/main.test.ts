/**
 * `npm start` end to end: the runner (as `npm start` runs it, through the tsx CLI) comes up with
 * both default regions within 15 s, and after SIGINT no process it started is left. Also: without
 * redis-server on PATH it prints how to install it and exits non-zero.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { beforeAll, describe, expect, it } from 'vitest';
import { loadLocalPolicies } from '../../../local/iam/load.js';
import { repoRoot } from '../../../local/worker/process-invoker.js';
import { defaultRegions, localPacerSettings, regionResources } from '../../../shared/region/resources.js';
import { descendants, running } from '../../support/proc.js';
import { tempDir } from '../../support/tmp.js';

function waitForLine(proc: ChildProcess, pattern: RegExp, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    let output = '';
    const timer = setTimeout(
      () => reject(new Error(`no ${pattern} within ${timeoutMs} ms; output:\n${output}`)),
      timeoutMs,
    );
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const line = output.split('\n').find((l) => pattern.test(l));
      if (line) {
        clearTimeout(timer);
        resolve(line);
      }
    };
    proc.stdout?.on('data', onData);
    proc.stderr?.on('data', onData);
    proc.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`runner exited with ${code} before ${pattern}; output:\n${output}`));
    });
  });
}

describe('npm start (local/main.ts)', () => {
  beforeAll(async () => {
    // The first start after a change to the stack synthesizes its IAM policies (seconds, said on
    // the console) and caches them in .paceline/iam: warm that cache, so what is measured is the
    // start every other run has.
    await loadLocalPolicies({ regions: defaultRegions, pacer: localPacerSettings });
  }, 180_000);

  it.each(['SIGINT', 'SIGTERM'] as const)(
    'is ready within 15 s and leaves no child process after %s',
    async (signal) => {
      const startedAt = performance.now();
      // `npm start` runs `node --import tsx local/main.ts` (no tsx CLI parent: that parent relays a
      // signal to its child and SIGKILLs it when the child does not confirm within 30 ms, which
      // orphans the child's redis-servers on a busy machine); run that same command here.
      // Stub handlers (--handler) so the test does not depend on the real handlers' init succeeding.
      const stub = 'test/fixtures/handlers/echo.ts';
      const args = [
        'local/main.ts',
        '--prewarm',
        // Free ports and a scratch state folder: a developer's own `npm start` may be running.
        '--base-port',
        '0',
        '--state-dir',
        tempDir('paceline-main-'),
        ...Object.values(regionResources.functions).flatMap((f) => ['--handler', `${f.name}=${stub}`]),
      ];
      const proc = spawn(process.execPath, ['--import', 'tsx', ...args], {
        cwd: repoRoot,
        env: { ...process.env, POWERTOOLS_METRICS_DISABLED: 'true' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      const pid = proc.pid as number;
      try {
        const ready = await waitForLine(proc, /Paceline local regions ready/, 15_000);
        const readyMs = performance.now() - startedAt;
        console.log(`npm start ready in ${(readyMs / 1000).toFixed(2)} s: ${ready}`);
        expect(readyMs).toBeLessThan(15_000);
        expect(ready).toContain('us-east-1, us-west-2');
        const before = descendants(pid);
        const commands = [...before.values()];
        expect(commands.filter((c) => c.startsWith('redis-server')).length).toBe(2); // one per region
        // One prewarmed instance per function per region; the scheduler may have started more
        // (pacer, sweep-spend) instances if a minute boundary passed meanwhile.
        expect(commands.filter((c) => c.includes('worker-entry')).length).toBeGreaterThanOrEqual(
          2 * Object.keys(regionResources.functions).length,
        );
        const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
        process.kill(pid, signal);
        expect(await exited).toBe(0);
        const deadline = Date.now() + 5000;
        let left = [...before.keys()].filter(running);
        while (left.length > 0 && Date.now() < deadline) {
          await new Promise((r) => setTimeout(r, 50));
          left = [...before.keys()].filter(running);
        }
        expect(left.map((p) => `${p} ${before.get(p)}`)).toEqual([]);
      } finally {
        if (running(pid)) proc.kill('SIGKILL');
      }
    },
    40_000,
  );

  it('refuses an unknown --scheduler with one line and exit 64, before starting anything', async () => {
    const proc = spawn(process.execPath, ['--import', 'tsx', 'local/main.ts', '--scheduler', 'cron'], {
      cwd: repoRoot,
      env: { ...process.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    proc.stdout?.on('data', (c: Buffer) => {
      output += c.toString();
    });
    proc.stderr?.on('data', (c: Buffer) => {
      output += c.toString();
    });
    const code = await new Promise<number | null>((resolve) => proc.once('exit', (c) => resolve(c)));
    expect(code).toBe(64);
    expect(output.trim().split('\n')).toEqual(["--scheduler must be 'eventbridge' or 'exact', got 'cron'"]);
  });

  it('without redis-server on PATH explains how to install it and exits non-zero', async () => {
    // Default (stable) ports on purpose: they sit in Linux's ephemeral range, so another process may
    // hold one; the missing binary must still be what the user is told about (a CI run once saw
    // "port 45106 is in use" here instead).
    const proc = spawn(process.execPath, ['--import', 'tsx', 'local/main.ts', '--regions', 'us-east-1'], {
      cwd: repoRoot,
      env: { PATH: '/nonexistent', HOME: process.env.HOME ?? '/tmp' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    proc.stdout?.on('data', (c: Buffer) => {
      output += c.toString();
    });
    proc.stderr?.on('data', (c: Buffer) => {
      output += c.toString();
    });
    const code = await new Promise<number | null>((resolve) => proc.once('exit', (c) => resolve(c)));
    expect(code).not.toBe(0);
    expect(output).toContain('redis-server was not found on PATH');
    expect(output).toContain('apt-get install -y redis-server');
    expect(output).toContain('brew install redis');
  });
});
