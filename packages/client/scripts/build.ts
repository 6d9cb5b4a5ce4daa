/**
 * Builds the `paceline` package into `dist/` (`npm run build`; `prepack` before `npm pack`):
 *
 * - `dist/client.js`: one ESM file, esbuild's bundle of `src/index.ts` with the packages it imports
 *   bundled in and tree-shaken (the AWS SDK's DynamoDB, Kinesis and SSM clients, smithy,
 *   cluster-key-slot) — all but the package's `dependencies` (ioredis), which stay imports. ioredis
 *   stays installed because a caller may pass its own client (`config.redis`) and the client tells
 *   a cluster from a single node with `instanceof Cluster`, which a second, bundled copy of ioredis
 *   would answer wrongly; its types appear in the declarations (`config.redis`). The Lua scripts
 *   (shared/redis/scripts/*.lua) are inside it as text.
 * - `dist/types/`: tsc's declarations of the files the entry's declarations reach. The AWS SDK is
 *   not installed with the package, so the SDK client types they name resolve to
 *   `types/aws-sdk-clients.d.ts` (what Paceline calls on a client).
 * - `dist/THIRD-PARTY-LICENSES.txt`: name, version, license and license text of every bundled package.
 *
 * Uses the repository's esbuild, tsx and typescript (root devDependencies).
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type BuildOptions, build, type Metafile } from 'esbuild';
import { LUA_BUNDLE_CONDITIONS, LUA_BUNDLE_LOADER } from '../../../shared/redis/scripts/bundling.js';

export const packageDir = fileURLToPath(new URL('..', import.meta.url));
export const repoRoot = resolve(packageDir, '../..');
const dist = join(packageDir, 'dist');
const typesDir = join(dist, 'types');

/** The package's runtime `dependencies`: left as imports in the bundle, installed by npm. */
export function dependencies(): string[] {
  const pkg = JSON.parse(readFileSync(join(packageDir, 'package.json'), 'utf8')) as {
    dependencies?: Record<string, string>;
  };
  return Object.keys(pkg.dependencies ?? {});
}

/** The modules the declarations import SDK client types from → the shipped stand-in's file. */
const SDK_TYPE_MODULES = ['@aws-sdk/client-dynamodb', '@aws-sdk/client-kinesis'];
const SDK_TYPES_FILE = 'aws-sdk-clients.d.ts';

/** esbuild's options for `dist/client.js` (the import-graph test bundles with the same). */
export function bundleOptions(): BuildOptions & { metafile: true } {
  return {
    entryPoints: [join(packageDir, 'src/index.ts')],
    absWorkingDir: repoRoot,
    outfile: join(dist, 'client.js'),
    bundle: true,
    platform: 'node',
    format: 'esm',
    // Runs on the supported Node (engines ≥ 22) and on the Node 20 of CI machines.
    target: 'node20',
    // The SDK's ES module builds: they tree-shake; the CommonJS ones are one file per package.
    mainFields: ['module', 'main'],
    external: dependencies(),
    // The Lua scripts go inside the bundle as text (shared/redis/scripts/bundling.ts).
    conditions: [...LUA_BUNDLE_CONDITIONS],
    loader: { ...LUA_BUNDLE_LOADER },
    legalComments: 'eof',
    metafile: true,
    logLevel: 'warning',
  };
}

/** The npm packages (name → folder) whose files went into the bundle. */
export function bundledPackages(metafile: Metafile): Map<string, string> {
  const out = new Map<string, string>();
  for (const input of Object.keys(metafile.inputs)) {
    const m = /^(.*node_modules\/((?:@[^/]+\/)?[^/]+))\//.exec(input);
    if (m) out.set(m[2] as string, join(repoRoot, m[1] as string));
  }
  return out;
}

/** One block per distinct license text, naming every bundled package under it. */
function thirdPartyLicenses(packages: Map<string, string>): string {
  const byText = new Map<string, string[]>();
  for (const [name, dir] of [...packages].sort(([a], [b]) => a.localeCompare(b))) {
    const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as {
      version: string;
      license?: string;
    };
    const file = readdirSync(dir).find((f) => /^licen[cs]e(\.(md|txt))?$/i.test(f));
    const text = file
      ? readFileSync(join(dir, file), 'utf8').trim()
      : `(no license file; package.json says ${pkg.license})`;
    const list = byText.get(text) ?? [];
    list.push(`${name}@${pkg.version} (${pkg.license ?? 'unknown'})`);
    byText.set(text, list);
  }
  const blocks = [...byText].map(([text, names]) => `${names.join('\n')}\n\n${text}\n`);
  return `dist/client.js bundles these packages, under these licenses.\n\n${blocks.join(`\n${'-'.repeat(78)}\n\n`)}`;
}

/** Bare module specifiers and relative ones of a declaration file. */
function specifiers(text: string): string[] {
  return [...text.matchAll(/\b(?:from|import)\s*\(?\s*['"]([^'"]+)['"]/g)].map((m) => m[1] as string);
}

/** The declaration files reachable from `entry` through relative imports and re-exports. */
function reachable(entry: string): Set<string> {
  const seen = new Set<string>();
  const visit = (file: string) => {
    if (seen.has(file)) return;
    if (!existsSync(file))
      throw new Error(`build: ${relative(packageDir, file)} is imported but was not emitted`);
    seen.add(file);
    for (const s of specifiers(readFileSync(file, 'utf8'))) {
      if (s.startsWith('.')) visit(resolve(dirname(file), s.replace(/\.js$/, '.d.ts')));
    }
  };
  visit(entry);
  return seen;
}

/**
 * Emits the declarations (tsc), keeps the ones the entry reaches, points the SDK client types at
 * the shipped stand-in and refuses any other import of a package the install will not have.
 */
function declarations(): void {
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  const emitted = spawnSync(process.execPath, [tsc, '-p', join(packageDir, 'tsconfig.build.json')], {
    stdio: 'inherit',
  });
  if (emitted.status !== 0) throw new Error('build: tsc failed (errors above)');
  const keep = reachable(join(typesDir, 'packages/client/src/index.d.ts'));
  for (const e of readdirSync(typesDir, { withFileTypes: true, recursive: true })) {
    const file = join(e.parentPath, e.name);
    if (e.isFile() && !keep.has(file)) rmSync(file);
  }
  const deps = new Set(dependencies());
  const sdkTypes = join(typesDir, SDK_TYPES_FILE);
  copyFileSync(join(packageDir, 'types', SDK_TYPES_FILE), sdkTypes);
  for (const file of keep) {
    let text = readFileSync(file, 'utf8');
    for (const module of SDK_TYPE_MODULES) {
      let target = relative(dirname(file), sdkTypes)
        .split(sep)
        .join('/')
        .replace(/\.d\.ts$/, '.js');
      if (!target.startsWith('.')) target = `./${target}`;
      text = text.replaceAll(`from '${module}'`, `from '${target}'`);
    }
    const missing = specifiers(text).filter(
      (s) => !s.startsWith('.') && !s.startsWith('node:') && !deps.has(s.split('/')[0] as string),
    );
    if (missing.length > 0) {
      throw new Error(
        `build: ${relative(packageDir, file)} imports ${missing.join(', ')}, which installing the package does not provide: ` +
          'add its types to types/aws-sdk-clients.d.ts, or keep the type out of the public API',
      );
    }
    writeFileSync(file, text);
  }
  removeEmptyDirs(typesDir);
}

/** Removes the directories under `dir` that the pruning left empty. */
function removeEmptyDirs(dir: string): void {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    if (!e.isDirectory()) continue;
    const sub = join(dir, e.name);
    removeEmptyDirs(sub);
    if (readdirSync(sub).length === 0) rmSync(sub, { recursive: true });
  }
}

/** Builds dist/ from scratch. */
export async function buildPackage(): Promise<void> {
  rmSync(dist, { recursive: true, force: true });
  const bundled = await build(bundleOptions());
  writeFileSync(
    join(dist, 'THIRD-PARTY-LICENSES.txt'),
    thirdPartyLicenses(bundledPackages(bundled.metafile)),
  );
  declarations();
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await buildPackage();
}
