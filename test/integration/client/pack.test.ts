/**
 * The client package as another repository gets it: `npm pack` of the workspace
 * `packages/client` (which builds `dist/` through `prepack`: one bundled `dist/client.js` and its
 * declarations), a scratch project in the OS temp dir (outside this repository) installs the
 * tarball with npm, type-checks a file importing `paceline/client` against the shipped
 * declarations (library checking on: every declaration the import reaches must resolve with what
 * npm installed), runs it on the installed JavaScript — creating a real client against a local
 * region — and records what the import loaded: never the CDK, an emulator, an SDK client the client
 * does not call, or a Lambda-side library. What npm installs for the tarball is measured both ways,
 * each at most 20 MB: the sum of file sizes, and the disk usage `du -sk` reports (4 KiB blocks on
 * ext4: many small files cost far more than their size).
 *
 * Offline-friendly: `--prefer-offline` takes packages from the npm cache and asks the registry
 * only for what the cache lacks.
 */
import {
  copyFileSync,
  existsSync,
  lstatSync,
  readdirSync,
  readFileSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalRegion, startLocalRegion } from '../../../local/region.js';
import { runChild } from '../../support/child.js';
import { tempDir } from '../../support/tmp.js';

const repoRoot = fileURLToPath(new URL('../../..', import.meta.url));
const packageDir = join(repoRoot, 'packages/client');
const fixture = join(repoRoot, 'test/fixtures/client-scratch');
const tsc = join(repoRoot, 'node_modules/typescript/bin/tsc');
let region: LocalRegion;

beforeAll(async () => {
  region = await startLocalRegion();
}, 60_000);
afterAll(async () => {
  await region?.stop();
});

const t0 = Date.now();
const step = (name: string) =>
  console.log(`pack test: ${name} at ${((Date.now() - t0) / 1000).toFixed(1)} s`);

function run(
  command: string,
  args: readonly string[],
  cwd: string,
  env: Readonly<Record<string, string | undefined>> = process.env,
) {
  return runChild(command, args, { cwd, env, timeoutMs: 400_000 });
}

const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

/** Newest modification time under `dir` (files only), ms. */
function newest(dir: string): number {
  let max = 0;
  for (const e of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (e.isFile()) max = Math.max(max, statSync(join(e.parentPath, e.name)).mtimeMs);
  }
  return max;
}

/** The package's dist/ exists and was built after the last change to the build's inputs. */
function distIsFresh(): boolean {
  const entry = join(packageDir, 'dist/client.js');
  const types = join(packageDir, 'dist/types/packages/client/src/index.d.ts');
  if (!existsSync(entry) || !existsSync(types)) return false;
  const inputs = Math.max(
    newest(join(packageDir, 'src')),
    newest(join(packageDir, 'scripts')),
    newest(join(packageDir, 'types')),
    newest(join(repoRoot, 'shared')),
    statSync(join(packageDir, 'package.json')).mtimeMs,
    statSync(join(packageDir, 'tsconfig.build.json')).mtimeMs,
    statSync(join(repoRoot, 'tsconfig.json')).mtimeMs,
  );
  return Math.min(statSync(entry).mtimeMs, statSync(types).mtimeMs) > inputs;
}

/** The sum of the sizes of the files under `dir` (apparent size, no block rounding). */
function fileBytes(dir: string): number {
  let bytes = 0;
  for (const e of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (e.isFile()) bytes += lstatSync(join(e.parentPath, e.name)).size;
  }
  return bytes;
}

/** The disk usage of `dir` as `du -sk` reports it, bytes. */
async function diskBytes(dir: string): Promise<number> {
  const du = await run('du', ['-sk', dir], dir);
  expect(du.code, du.stderr).toBe(0);
  return Number(du.stdout.split(/\s/)[0]) * 1024;
}

describe('the packed package in a scratch project', () => {
  it('installs from the tarball (≤ 20 MB on disk and in file sizes), type-checks and runs an import of paceline/client', async () => {
    const packDir = tempDir('paceline-pack-');
    // `npm test` has just built dist/: pack it as is when it is newer than every source the build
    // reads (saves a minute of tsc on a loaded machine); otherwise `prepack` builds it.
    const fresh = distIsFresh();
    if (fresh) expect((await run(npm, ['run', 'copy-docs'], packageDir)).code).toBe(0);
    const packed = await run(
      npm,
      ['pack', '--json', '--pack-destination', packDir, ...(fresh ? ['--ignore-scripts'] : [])],
      packageDir,
    );
    expect(packed.code, packed.stderr).toBe(0);
    step('packed');
    const [info] = JSON.parse(packed.stdout.slice(packed.stdout.indexOf('['))) as [
      { filename: string; files: { path: string }[] },
    ];
    const files = info.files.map((f) => f.path);
    expect(files).toContain('dist/client.js');
    expect(files).toContain('dist/types/packages/client/src/index.d.ts');
    expect(files).toContain('dist/types/aws-sdk-clients.d.ts');
    expect(files).toContain('dist/THIRD-PARTY-LICENSES.txt');
    // One bundle: no other JavaScript (the SDK is inside it, not shipped beside it).
    expect(files.filter((f) => /\.(js|mjs|cjs)$/.test(f))).toEqual(['dist/client.js']);
    // Only the built client: no sources, tests, CDK app, CLI or local runtime in the tarball.
    expect(
      files.filter(
        (f) => !f.startsWith('dist/') && !['package.json', 'README.md', 'LICENSE', 'client.md'].includes(f),
      ),
    ).toEqual([]);
    expect(files.filter((f) => /^dist\/(cdk|local|cli|functions|bench|sim|test)\//.test(f))).toEqual([]);
    const tarball = join(packDir, readdirSync(packDir).find((f) => f.endsWith('.tgz')) as string);

    const scratch = tempDir('paceline-scratch-');
    expect(scratch.startsWith(repoRoot)).toBe(false);
    writeFileSync(
      join(scratch, 'package.json'),
      JSON.stringify({ name: 'scratch', private: true, type: 'module' }),
    );
    // The tarball alone first: what an ad server's `npm install` of the client adds.
    const install = await run(
      npm,
      ['install', '--prefer-offline', '--no-audit', '--no-fund', tarball],
      scratch,
    );
    expect(install.code, install.stderr).toBe(0);
    step('installed');
    const bytes = fileBytes(join(scratch, 'node_modules'));
    const disk = await diskBytes(join(scratch, 'node_modules'));
    console.log(
      `pack test: npm install of the client tarball: node_modules ${(bytes / 1e6).toFixed(1)} MB ` +
        `(sum of file sizes), ${(disk / 1e6).toFixed(1)} MB on disk (du -sk)`,
    );
    expect(bytes).toBeLessThanOrEqual(20_000_000);
    expect(disk).toBeLessThanOrEqual(20_000_000);
    // The supported Node (engines ≥ 22) is said at install time on an older one.
    if (Number(process.versions.node.split('.')[0]) < 22) {
      expect(install.stderr).toMatch(/EBADENGINE.*paceline|paceline.*EBADENGINE|Unsupported engine/s);
    }
    const installed = JSON.parse(readFileSync(join(scratch, 'node_modules/paceline/package.json'), 'utf8'));
    expect(installed.exports['./client']).toEqual({
      types: './dist/types/packages/client/src/index.d.ts',
      import: './dist/client.js',
    });
    expect(installed.bin).toBeUndefined(); // the operator CLI runs from a checkout, not from the client
    // npm installed the client's one dependency (ioredis, with its own) and nothing of the AWS SDK
    // (bundled), the Lambda side, the CDK or the emulators.
    const notInstalled = [
      'aws-cdk-lib',
      'constructs',
      'aws-cdk',
      'cdk-nag',
      'chart.js',
      'esbuild',
      'tsx',
      'dynalite',
      'kinesalite',
      's3rver',
      '@aws-sdk/client-s3',
      '@aws-sdk/client-sqs',
      '@aws-sdk/client-elasticache',
      '@aws-lambda-powertools/logger',
      '@middy/core',
      'aws-kinesis-agg',
    ];
    expect(Object.keys(installed.dependencies ?? {})).toEqual(['ioredis']);
    expect(notInstalled.filter((d) => existsSync(join(scratch, 'node_modules', d, 'package.json')))).toEqual(
      [],
    );
    expect(['@aws-sdk', '@smithy'].filter((d) => existsSync(join(scratch, 'node_modules', d)))).toEqual([]);

    writeFileSync(
      join(scratch, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'ES2022',
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          strict: true,
          types: ['node'],
          outDir: '.',
          // Library checking on: an import in the shipped declarations that the install does not
          // provide (an SDK module) is an error here, not a silent `any`.
          skipLibCheck: false,
        },
        files: ['main.ts', 'wrong.ts'],
      }),
    );
    for (const f of ['main.ts', 'record-imports.mjs', 'record-imports-hooks.mjs']) {
      copyFileSync(join(fixture, f), join(scratch, f));
    }
    const types = await run(
      npm,
      ['install', '--prefer-offline', '--no-audit', '--no-fund', '--save-dev', '@types/node@20.19.0'],
      scratch,
    );
    expect(types.code, types.stderr).toBe(0);

    // Type-checks against the shipped declarations (the repository's tsc; types from the scratch's
    // node_modules), in one pass with a file that must NOT type-check: the declarations are real
    // types, not `any`. main.ts has no error and is emitted; wrong.ts has exactly its bad call.
    writeFileSync(
      join(scratch, 'wrong.ts'),
      "import { createPacelineClient } from 'paceline/client';\n" +
        "const client = await createPacelineClient({ endpoints: { region: 'us-east-1' }, redis: { mode: 'standalone', nodes: [], tls: false } });\n" +
        'client.bid({ campaignId: 42 });\n',
    );
    const checked = await run(process.execPath, [tsc, '-p', '.'], scratch);
    step('type-checked');
    const errors = checked.stdout.split('\n').filter((l) => /error TS\d+/.test(l));
    expect(errors.length, checked.stdout).toBeGreaterThan(0);
    expect(
      errors.filter((l) => !l.startsWith('wrong.ts(3,')),
      checked.stdout,
    ).toEqual([]);

    // Runs on the installed JavaScript, with a real client against a local region.
    const importLog = join(scratch, 'imports.log');
    const ran = await run(process.execPath, ['--import', './record-imports.mjs', 'main.js'], scratch, {
      PATH: process.env.PATH,
      IMPORT_LOG: importLog,
      ...region.clientEnv,
    });
    expect(ran.code, ran.stderr).toBe(0);
    step('ran');
    const out = JSON.parse(ran.stdout.trim().split('\n').at(-1) as string);
    expect(out.nurl).toBe(
      `https://ads.example.com/notice/win?b=b-1&c=c-1&t=1763700000000&p=3000&price=\${AUCTION_PRICE}`,
    );
    expect(out.event).toMatchObject({
      type: 'win',
      bidId: 'b-1',
      auctionPrice: '2.10',
      bidAt: 1763700000000,
    });
    expect(out.decision).toEqual({ bid: false, reason: 'unknown-campaign', pacing: 'missing' });
    const loaded = readFileSync(importLog, 'utf8').split('\n').filter(Boolean);
    expect(loaded.some((u) => u.includes('/node_modules/paceline/dist/client.js'))).toBe(true);
    expect(loaded.filter((u) => u.startsWith('file:') && u.includes(repoRoot))).toEqual([]);
    expect(
      loaded.filter((u) =>
        /aws-cdk-lib|\/constructs\/|cdk-nag|dynalite|kinesalite|s3rver|client-s3|client-sqs|client-elasticache|powertools|@middy/.test(
          u,
        ),
      ),
    ).toEqual([]);
  }, 600_000);
});
