import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const common = new URL('../../../cli/common.ts', import.meta.url).href;
const tsx = new URL('../../../node_modules/tsx/dist/loader.mjs', import.meta.url).href;

/**
 * Runs a script that calls ensureNodeFlags, prints the flags it runs with, and exits with `code`
 * (a signal name: kills itself with it).
 */
function run(code: number | NodeJS.Signals, env: Record<string, string> = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'node-flags-'));
  const script = join(dir, 'script.mts');
  writeFileSync(
    script,
    `import { ensureNodeFlags, SIM_NODE_FLAGS } from ${JSON.stringify(common)};
await ensureNodeFlags(SIM_NODE_FLAGS);
console.log(JSON.stringify({ execArgv: process.execArgv, arg: process.argv[2] }));
${typeof code === 'number' ? `process.exit(${code});` : `process.kill(process.pid, '${code}');`}`,
  );
  const { NODE_OPTIONS: _drop, ...rest } = process.env;
  return spawnSync(process.execPath, ['--import', tsx, script, 'an-argument'], {
    encoding: 'utf8',
    env: { ...rest, ...env },
  });
}

describe('ensureNodeFlags (the simulator process flags)', () => {
  it('re-runs the script once with the missing flags, keeping its arguments and exit code', () => {
    const r = run(3);
    expect(r.status).toBe(3);
    const lines = r.stdout.trim().split('\n');
    // One line: only the re-run process got past ensureNodeFlags.
    expect(lines).toHaveLength(1);
    const out = JSON.parse(lines[0] as string) as { execArgv: string[]; arg: string };
    expect(out.execArgv).toContain('--max-semi-space-size=64');
    expect(out.arg).toBe('an-argument');
  });

  it('dies by the signal that killed the re-run process (as a parent waiting for it expects)', () => {
    const r = run('SIGTERM');
    expect(r.signal).toBe('SIGTERM');
    expect(r.stdout).toContain('--max-semi-space-size=64');
  });

  it('does nothing when the flags are already given (NODE_OPTIONS)', () => {
    const r = run(0, { NODE_OPTIONS: '--max-semi-space-size=64' });
    expect(r.status).toBe(0);
    const out = JSON.parse(r.stdout.trim()) as { execArgv: string[] };
    expect(out.execArgv).not.toContain('--max-semi-space-size=64');
  });
});
