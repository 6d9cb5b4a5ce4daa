/**
 * The local policy set for a set of regions, synthesized once and cached: the cache key is a hash
 * of every input of the synthesis — the source of `cdk/app.ts` and of every module it imports
 * (followed through relative imports: `cdk/`, `shared/region/`, …), the extraction code in
 * `local/iam/`, `cdk.json`, the `aws-cdk-lib` version and the regions and pacer layout — so
 * `npm start` and the tests synthesize only after one of them changed. Cached sets live in
 * `.paceline/iam/<hash>.json`; a synthesis runs in a child process (`synth-main.ts`) under a lock
 * file, so test workers starting at once synthesize one set once.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { LocalPolicySet } from './policy.js';

/** Repository root (the CDK app and cdk.json are there). */
const repoRoot = fileURLToPath(new URL('../../', import.meta.url));

/** What a policy set is synthesized for. */
export interface LocalPoliciesRequest {
  readonly regions: readonly string[];
  readonly pacer: { readonly shards: number; readonly instancesPerShard: number };
}

/** A loaded set, and whether it came from the cache. */
export interface LoadedPolicies {
  readonly set: LocalPolicySet;
  readonly cached: boolean;
  /** Where the set is cached. */
  readonly file: string;
}

/** Where cached sets live. @default `<repo>/.paceline/iam` */
export function policyCacheDir(): string {
  return process.env.PACELINE_IAM_CACHE_DIR ?? join(repoRoot, '.paceline', 'iam');
}

const IMPORT = /(?:from|import)\s*\(?\s*['"](\.{1,2}\/[^'"]+)['"]/g;

/** Every repository file `entries` import, transitively, through relative imports. */
export function importClosure(entries: readonly string[]): string[] {
  const seen = new Set<string>();
  const queue = entries.map((e) => resolve(repoRoot, e));
  while (queue.length > 0) {
    const file = queue.pop() as string;
    if (seen.has(file) || !existsSync(file)) continue;
    seen.add(file);
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(IMPORT)) {
      const target = resolve(dirname(file), (m[1] as string).replace(/\.js$/, '.ts'));
      if (!seen.has(target)) queue.push(target);
    }
  }
  return [...seen].sort();
}

/** The cache key of a request: a hash of every input of its synthesis. */
export function policyInputsHash(request: LocalPoliciesRequest): string {
  const h = createHash('sha256');
  const files = importClosure(['cdk/app.ts', 'local/iam/synth.ts', 'local/iam/synth-main.ts']);
  for (const file of [...files, join(repoRoot, 'cdk.json')]) {
    h.update(file.slice(repoRoot.length));
    h.update(readFileSync(file));
  }
  const cdkLib = JSON.parse(
    readFileSync(join(repoRoot, 'node_modules/aws-cdk-lib/package.json'), 'utf8'),
  ) as {
    version: string;
  };
  h.update(`aws-cdk-lib@${cdkLib.version}`);
  const { shards, instancesPerShard } = request.pacer;
  h.update(JSON.stringify({ regions: request.regions, pacer: { shards, instancesPerShard } }));
  return h.digest('hex').slice(0, 20);
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Takes the lock file, or returns false when a live process holds it. */
function tryLock(lock: string): boolean {
  try {
    writeFileSync(lock, String(process.pid), { flag: 'wx' });
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    const holder = Number(readFileSync(lock, 'utf8') || 0);
    if (holder > 0 && pidAlive(holder)) return false;
    rmSync(lock, { force: true });
    return tryLock(lock);
  }
}

function synthesizeInChild(request: LocalPoliciesRequest, hash: string, out: string): Promise<void> {
  const arg = JSON.stringify({ input: request, hash, out });
  return new Promise((done, fail) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', join(repoRoot, 'local/iam/synth-main.ts'), arg],
      { cwd: repoRoot, maxBuffer: 16 * 1024 * 1024, env: { ...process.env, CDK_DISABLE_VERSION_CHECK: '1' } },
      (error, _stdout, stderr) => {
        if (!error) done();
        else
          fail(
            new Error(
              `local IAM: synthesizing the stack's policies failed: ${stderr.trim() || error.message}`,
            ),
          );
      },
    );
  });
}

/**
 * The policy set for `request`, from the cache or synthesized now (seconds; the set says how
 * long in `synthesis.synthMs`). Waits for another process synthesizing the same set.
 */
export async function loadLocalPolicies(
  request: LocalPoliciesRequest,
  options: {
    readonly timeoutMs?: number;
    /** Called before this process synthesizes (a miss: seconds). @default none */
    readonly onSynthesize?: () => void;
  } = {},
): Promise<LoadedPolicies> {
  const hash = policyInputsHash(request);
  const dir = policyCacheDir();
  const file = join(dir, `${hash}.json`);
  const read = () => JSON.parse(readFileSync(file, 'utf8')) as LocalPolicySet;
  if (existsSync(file)) return { set: read(), cached: true, file };
  mkdirSync(dir, { recursive: true });
  const lock = `${file}.lock`;
  const deadline = Date.now() + (options.timeoutMs ?? 300_000);
  while (!tryLock(lock)) {
    if (existsSync(file)) return { set: read(), cached: true, file };
    if (Date.now() > deadline)
      throw new Error(`local IAM: timed out waiting for ${lock} (another process synthesizing)`);
    await new Promise((r) => setTimeout(r, 200));
  }
  try {
    if (existsSync(file)) return { set: read(), cached: true, file };
    options.onSynthesize?.();
    await synthesizeInChild(request, hash, file);
    return { set: read(), cached: false, file };
  } finally {
    rmSync(lock, { force: true });
  }
}
