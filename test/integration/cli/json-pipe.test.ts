/**
 * `--json` output arrives whole however it is read: piped into a reader that sleeps before it
 * reads (the CLI's writes wait on a full pipe), read in small slow pieces, or cut by `head -c`
 * (the reader goes away: the CLI ends quietly, no stack trace). A process that called
 * `process.exit()` right after writing lost everything past the pipe's buffer (131,072 bytes).
 *
 * Real processes through `sh`, against a local region holding 1.5 MB of quarantined records
 * (`dead-letters list --json` prints them base64-encoded); every other command's `--json` goes
 * through the sleeping reader too.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalRegion, startLocalRegion } from '../../../local/region.js';
import { DeadLetterStore } from '../../../shared/quarantine/dead-letter-store.js';
import { runChild } from '../../support/child.js';
import { tempDir } from '../../support/tmp.js';

const root = fileURLToPath(new URL('../../..', import.meta.url));
let region: LocalRegion;
let env: Record<string, string>;
const work = tempDir('paceline-json-pipe-');

beforeAll(async () => {
  region = await startLocalRegion();
  env = {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '/tmp',
    ...region.clientEnv,
    PACELINE_STATE_DIR: work,
  };
  const store = new DeadLetterStore({ client: region.dynamodb, tableName: region.tableName('deadLetters') });
  // 8 letters of 190 KB (inline: under the 256 KB limit): ~2 MB of base64 in the listing.
  for (let i = 0; i < 8; i++) {
    await store.put({
      source: 'track-spend',
      shardId: 'shardId-000000000000',
      sequenceNumber: String(49_000_000 + i),
      partitionKey: `c/b-${i}`,
      data: Buffer.alloc(190_000, 65 + i),
      reasonCode: 'spend.not-json',
      reason: 'Record is not JSON: spend events are UTF-8 JSON objects.',
      arrivedAt: 1_763_700_000_000 + i,
      quarantinedAt: 1_763_700_001_000 + i,
    });
  }
}, 60_000);
afterAll(async () => {
  await region?.stop();
});

const paceline = `${JSON.stringify(process.execPath)} ${JSON.stringify(join(root, 'cli/paceline.mjs'))}`;
const tsx = `${JSON.stringify(process.execPath)} ${JSON.stringify(join(root, 'node_modules/tsx/dist/cli.mjs'))}`;

/** Runs a shell pipeline; resolves with its exit code and output. */
function sh(script: string) {
  return runChild('sh', ['-c', `set -e\n${script}`], { cwd: work, env, timeoutMs: 120_000 });
}

/** A reader that takes 16 KB every 20 ms (a consumer slower than the CLI writes). */
const slowReader = `${JSON.stringify(process.execPath)} -e ${JSON.stringify(
  "const fs=require('fs');let n=0;const t=setInterval(()=>{let b=Buffer.alloc(16384);let r;try{r=fs.readSync(0,b,0,b.length,null)}catch(e){if(e.code==='EAGAIN')return;throw e}if(r===0){clearInterval(t);return}fs.writeSync(1,b.subarray(0,r))},20)",
)}`;

describe('--json output through pipes', () => {
  it('dead-letters list --json: 2 MB complete through a sleeping reader and a slow one; head -c takes its part quietly', async () => {
    for (const [name, cmd] of [
      ['paceline', `${paceline} dead-letters list --source track-spend --json`],
      [
        'npm run dead-letters',
        `${tsx} ${JSON.stringify(join(root, 'cli/dead-letters.ts'))} list --source track-spend --json`,
      ],
    ] as const) {
      const file = await sh(`${cmd} > ${name === 'paceline' ? 'a' : 'b'}.json`);
      expect(file.code, file.stderr).toBe(0);
      const whole = readFileSync(join(work, name === 'paceline' ? 'a.json' : 'b.json'));
      expect(whole.length, name).toBeGreaterThan(2_000_000);
      const letters = JSON.parse(whole.toString()) as { data: string }[];
      expect(letters).toHaveLength(8);

      const sleeping = await sh(`${cmd} | (sleep 3; cat > sleeping.json)`);
      expect(sleeping.code, sleeping.stderr).toBe(0);
      expect(readFileSync(join(work, 'sleeping.json')).equals(whole), `${name}: sleeping reader`).toBe(true);

      const slow = await sh(`${cmd} | ${slowReader} > slow.json`);
      expect(slow.code, slow.stderr).toBe(0);
      expect(readFileSync(join(work, 'slow.json')).equals(whole), `${name}: slow reader`).toBe(true);

      // head takes its first MiB and goes away: exactly those bytes, and the CLI ends without a
      // stack trace (EPIPE is not an error of the command).
      const cut = await sh(`${cmd} 2> head-err.txt | head -c 1048576 > head.json; cat head-err.txt`);
      expect(cut.code, cut.stderr).toBe(0);
      expect(
        readFileSync(join(work, 'head.json')).equals(whole.subarray(0, 1_048_576)),
        `${name}: head -c`,
      ).toBe(true);
      expect(cut.stdout, name).not.toMatch(/EPIPE|\n\s+at |Error/);
    }
  }, 300_000);

  it.each([
    ['paceline status', `${paceline} status --json`],
    ['paceline spend status', `${paceline} spend status --json`],
    ['paceline spend report', `${paceline} spend report --json`],
    ['paceline budgets account list', `${paceline} budgets account list --json`],
    ['paceline leader-override', `${paceline} leader-override --shard 0 --instance auto --json`],
    ['paceline failback', `${paceline} failback --region us-east-1 --json`],
    ['paceline dead-letters list --on-failure', `${paceline} dead-letters list --on-failure --json`],
    ['npm run budgets', `${tsx} ${JSON.stringify(join(root, 'cli/budgets.ts'))} account list --json`],
  ])(
    '%s --json: one complete JSON document through a sleeping reader',
    async (_name, cmd) => {
      const r = await sh(`${cmd} | (sleep 2; cat)`);
      expect(r.code, r.stderr).toBe(0);
      expect(() => JSON.parse(r.stdout), r.stdout).not.toThrow();
      expect(r.stderr).toMatch(/Target: local us-east-1 \(/); // the target line on stderr, not in the JSON
      // The SDK's Node-version notice is not repeated in every command's output (README, Prerequisites).
      expect(r.stderr).not.toMatch(/NodeVersionSupportWarning/);
    },
    120_000,
  );
});
