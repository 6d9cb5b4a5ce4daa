/**
 * One-shot tools (`npm run sim`, `npm run bench`) start their own redis-server; stopped with
 * `kill` (SIGTERM to the node process alone, not Ctrl-C to the process group) they must not leave
 * it running, parented to init (local/emulators/redis.ts `killServersOnSignal`).
 */
import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../../../local/worker/process-invoker.js';
import { descendants, running } from '../../support/proc.js';

const tools = [
  ['sim', ['sim/main.ts', '--scenario', 'sim/scenarios/tiny-budgets.json', '--strategy', 'paceline']],
  ['bench', ['bench/main.ts', 'counting', '--events', '100000']],
] as const;

describe('one-shot tools stopped by a signal', () => {
  it.each(tools)(
    '%s: SIGTERM kills its redis-server too',
    async (_name, args) => {
      const proc = spawn(process.execPath, ['--import', 'tsx', ...args], {
        cwd: repoRoot,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      const pid = proc.pid as number;
      let output = '';
      proc.stdout?.on('data', (c: Buffer) => {
        output += c.toString();
      });
      proc.stderr?.on('data', (c: Buffer) => {
        output += c.toString();
      });
      try {
        // Wait until its redis-server runs.
        let servers: number[] = [];
        const deadline = Date.now() + 30_000;
        while (servers.length === 0 && Date.now() < deadline) {
          await new Promise((r) => setTimeout(r, 100));
          servers = [...descendants(pid)].filter(([, cmd]) => cmd.startsWith('redis-server')).map(([p]) => p);
        }
        expect(servers.length, output).toBeGreaterThan(0);
        const exited = new Promise<NodeJS.Signals | null>((resolve) =>
          proc.once('exit', (_c, s) => resolve(s)),
        );
        process.kill(pid, 'SIGTERM');
        expect(await exited).toBe('SIGTERM');
        const gone = Date.now() + 5_000;
        while (servers.some(running) && Date.now() < gone) await new Promise((r) => setTimeout(r, 50));
        expect(servers.filter(running)).toEqual([]);
      } finally {
        if (running(pid)) proc.kill('SIGKILL');
      }
    },
    60_000,
  );
});
