/**
 * The client package's import graph (esbuild's resolver, every file and package it reaches from
 * `packages/client/src/index.ts`): no CDK, no emulator, nothing from the local runtime, the CLI or
 * the functions. An ad server importing `paceline/client` must not load aws-cdk-lib or test
 * servers, nor carry SDK clients it never calls (S3, SQS, ElastiCache) or Lambda-side libraries
 * (Powertools, middy).
 *
 * The package ships one bundle (`dist/client.js`, packages/client/scripts/build.ts): its
 * `dependencies` are exactly the packages the bundle leaves as imports, every one of them used by
 * the graph, at the repository's versions; everything else the graph imports is bundled from the
 * repository's own `dependencies` (so `npm ci` installs what the build reads). The packed-tarball
 * test checks the same at run time in a scratch project and measures what npm installs.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { describe, expect, it } from 'vitest';
import { bundledPackages, bundleOptions } from '../../../packages/client/scripts/build.js';

const repoRoot = fileURLToPath(new URL('../../..', import.meta.url));
const read = (path: string) => JSON.parse(readFileSync(`${repoRoot}${path}`, 'utf8'));

/** `@scope/name/sub` → `@scope/name`, `name/sub` → `name`. */
const packageOf = (p: string) =>
  p.startsWith('@') ? p.split('/').slice(0, 2).join('/') : (p.split('/')[0] as string);

/** The source graph: our files, and the packages they import (packages not followed). */
async function graph() {
  const result = await build({
    entryPoints: [`${repoRoot}packages/client/src/index.ts`],
    absWorkingDir: repoRoot,
    bundle: true,
    platform: 'node',
    format: 'esm',
    write: false,
    metafile: true,
    logLevel: 'silent',
    // Packages stay external: their own graphs are theirs; what matters is which we import.
    packages: 'external',
  });
  const inputs = result.metafile.inputs;
  const packages = new Set(
    Object.values(inputs)
      .flatMap((i) => i.imports.filter((x) => x.external).map((x) => x.path))
      .filter((p) => !p.startsWith('node:'))
      .map(packageOf),
  );
  return { files: Object.keys(inputs), packages };
}

/** The shipped bundle, built in memory with the package build's own options. */
async function bundle() {
  const result = await build({ ...bundleOptions(), write: false, logLevel: 'silent' });
  const [output] = Object.values(result.metafile.outputs);
  return {
    output: output as NonNullable<typeof output>,
    bundled: bundledPackages(result.metafile),
    inputs: Object.keys(result.metafile.inputs),
  };
}

const FORBIDDEN =
  /^(aws-cdk-lib|aws-cdk|constructs|cdk-nag|dynalite|kinesalite|s3rver|esbuild|vitest|tsx|@aws-lambda-powertools\/.*|@middy\/.*|@aws-sdk\/client-(s3|sqs|elasticache)|aws-kinesis-agg)$/;

describe('paceline/client import graph', () => {
  it('reaches no CDK, emulator, local-runtime, CLI, function or CDK-app module', async () => {
    const { files, packages } = await graph();
    expect(files).toContain('packages/client/src/index.ts');
    expect(files.filter((f) => /^(cdk|local|test|bench|sim|functions|cli)\//.test(f))).toEqual([]);
    expect([...packages].filter((p) => FORBIDDEN.test(p))).toEqual([]);
    expect(packages.has('ioredis')).toBe(true); // the graph is real: the client does use Redis
    expect(packages.has('@aws-sdk/client-dynamodb')).toBe(true);
  }, 60_000);

  it('the bundle imports only Node built-ins and the package dependencies, with import statements', async () => {
    const { output } = await bundle();
    const client = read('packages/client/package.json') as { dependencies: Record<string, string> };
    const builtins = new Set(builtinModules);
    const imported = output.imports.filter((i) => !(i.path.startsWith('node:') || builtins.has(i.path)));
    expect([...new Set(imported.map((i) => packageOf(i.path)))].sort()).toEqual(
      Object.keys(client.dependencies).sort(),
    );
    // A bundled CommonJS `require` of anything would throw in the ES module at run time.
    expect(
      output.imports.filter((i) => i.kind !== 'import-statement' && i.kind !== 'dynamic-import'),
    ).toEqual([]);
  }, 60_000);

  it("bundles what the graph imports from the repository's dependencies, and nothing forbidden", async () => {
    const { packages } = await graph();
    const { bundled } = await bundle();
    const client = read('packages/client/package.json') as { dependencies: Record<string, string> };
    const root = read('package.json') as { dependencies: Record<string, string> };
    // The package's dependencies: used by the graph, at the repository's versions.
    for (const [name, version] of Object.entries(client.dependencies)) {
      expect(packages.has(name), name).toBe(true);
      expect(version, name).toBe(root.dependencies[name]);
    }
    // Every other package the graph imports is in the bundle and a runtime dependency of the repository.
    const direct = [...packages].filter((p) => !(p in client.dependencies));
    expect(direct.filter((p) => !bundled.has(p))).toEqual([]);
    expect(direct.filter((p) => !(p in root.dependencies))).toEqual([]);
    expect(direct).toEqual(expect.arrayContaining(['@aws-sdk/client-dynamodb', '@aws-sdk/client-kinesis']));
    expect([...bundled.keys()].filter((p) => FORBIDDEN.test(p))).toEqual([]);
    expect([...bundled.keys()].filter((p) => p in client.dependencies)).toEqual([]);
  }, 60_000);

  it('carries the Lua scripts as text (shared/redis/scripts/*.lua), not a reader of files beside it', async () => {
    const { inputs } = await bundle();
    const scripts = readdirSync(`${repoRoot}shared/redis/scripts`).filter((f) => f.endsWith('.lua'));
    expect(scripts.length).toBeGreaterThan(0);
    for (const file of scripts) expect(inputs).toContain(`shared/redis/scripts/${file}`);
    expect(inputs).toContain('shared/redis/scripts/files.bundled.ts');
    expect(inputs).not.toContain('shared/redis/scripts/files.ts');
  }, 60_000);
});
