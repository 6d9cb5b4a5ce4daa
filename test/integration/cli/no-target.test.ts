/**
 * Every operator CLI, run as a real process with no target configured (no local endpoint, no
 * running `npm start`, no --aws), refuses before touching anything and says how to choose. The
 * AWS SDK's global endpoint override points at a trap server: a CLI that fell back to AWS would
 * connect to it.
 */
import { spawnSync } from 'node:child_process';
import { createServer, type Server } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXIT } from '../../../cli/common.js';
import { tempDir } from '../../support/tmp.js';

const root = fileURLToPath(new URL('../../..', import.meta.url));
let trap: Server;
let connections = 0;
let trapUrl = '';
beforeAll(async () => {
  trap = createServer((socket) => {
    connections++;
    socket.destroy();
  });
  await new Promise<void>((r) => trap.listen(0, '127.0.0.1', r));
  const address = trap.address();
  trapUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
});
afterAll(() => new Promise<void>((r) => trap.close(() => r())));

/** The environment of a shell with nothing chosen (credentials present, as on a laptop). */
function bareEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (
      !k.startsWith('AWS_') &&
      !k.startsWith('REDIS_') &&
      !k.startsWith('PACELINE_') &&
      k !== 'PACER_SHARDS'
    )
      env[k] = v;
  }
  return {
    ...env,
    AWS_REGION: 'us-east-1',
    AWS_ACCESS_KEY_ID: 'AKIDREALLOOKING',
    AWS_SECRET_ACCESS_KEY: 'secret',
    // Where the SDK would go if a CLI silently fell back to AWS.
    AWS_ENDPOINT_URL: trapUrl,
    // An empty state folder: a developer's running `npm start` is not a target here.
    PACELINE_STATE_DIR: tempDir('paceline-no-target-state-'),
  };
}

const tsx = `${root}/node_modules/.bin/tsx`;
const cases: { name: string; cmd: string; args: string[]; cwd?: string }[] = [
  { name: 'paceline status', cmd: 'node', args: [`${root}/cli/paceline.mjs`, 'status'] },
  { name: 'paceline status --json', cmd: 'node', args: [`${root}/cli/paceline.mjs`, 'status', '--json'] },
  { name: 'paceline budgets', cmd: 'node', args: [`${root}/cli/paceline.mjs`, 'budgets', 'account', 'list'] },
  {
    name: 'paceline leader-override',
    cmd: 'node',
    args: [`${root}/cli/paceline.mjs`, 'leader-override', '--shard', '0', '--instance', 'auto'],
  },
  { name: 'budgets (npm run budgets)', cmd: tsx, args: [`${root}/cli/budgets.ts`, 'account', 'list'] },
  {
    name: 'dead-letters (npm run dead-letters)',
    cmd: tsx,
    args: [`${root}/cli/dead-letters.ts`, 'list', '--source', 'track-spend'],
  },
];

describe('a CLI with no target configured', () => {
  it.each(cases)(
    '$name refuses with exit 2, one line saying how to choose, and touches nothing',
    ({ cmd, args }) => {
      const result = spawnSync(cmd, args, {
        cwd: tempDir('paceline-no-target-'),
        env: bareEnv(),
        encoding: 'utf8',
        timeout: 60_000,
      });
      expect(result.status, result.stderr).toBe(EXIT.usage);
      const lines = result.stderr.split('\n').filter((l) => l.trim() && !l.startsWith('npm warn'));
      expect(lines, result.stderr).toHaveLength(1);
      expect(lines[0]).toMatch(/No target chosen, nothing was touched/);
      expect(lines[0]).toMatch(/npm start/);
      expect(lines[0]).toMatch(/--aws/);
      expect(lines[0]).toMatch(/PACELINE_TARGET=aws/);
      expect(result.stderr).not.toMatch(/\n\s+at /); // no stack trace
      expect(result.stdout.trim()).toBe('');
      expect(connections).toBe(0);
    },
  );
});
