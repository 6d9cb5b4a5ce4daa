/**
 * Child-process entry of the local policy synthesis (`load.ts` starts it on a cache miss):
 * `node --import tsx local/iam/synth-main.ts '<json: { input, hash, out }>'` synthesizes the CDK
 * app for the input, extracts the policies and writes them to `out` (through a rename, so a
 * reader never sees half a file). Errors go to stderr with exit status 1.
 */
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type LocalSynthInput, synthesizeLocalPolicies } from './synth.js';

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
const { input, hash, out } = JSON.parse(process.argv[2] ?? '{}') as {
  input: LocalSynthInput;
  hash: string;
  out: string;
};
try {
  const set = synthesizeLocalPolicies(repoRoot, input, hash);
  mkdirSync(dirname(out), { recursive: true });
  const tmp = `${out}.${process.pid}.tmp`;
  writeFileSync(tmp, JSON.stringify(set));
  renameSync(tmp, out);
} catch (error) {
  console.error(error instanceof Error ? error.message : String(error));
  process.exit(1);
}
