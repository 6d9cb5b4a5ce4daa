/**
 * The client package's import graph (esbuild's resolver, every file and package it reaches from
 * `packages/client/src/index.ts`): no CDK, no emulator, nothing from the local runtime, the CLI or
 * the functions — and its package's `dependencies` are exactly the packages the graph imports, at
 * the repository's versions. An ad server importing `paceline/client` must not load aws-cdk-lib or
 * test servers, nor install SDK clients it never calls (S3, SQS, ElastiCache) or Lambda-side
 * libraries (Powertools, middy). The packed-tarball test checks the same at run time in a
 * scratch project and measures what npm installs.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { describe, expect, it } from 'vitest';

const repoRoot = fileURLToPath(new URL('../../..', import.meta.url));
const read = (path: string) => JSON.parse(readFileSync(`${repoRoot}${path}`, 'utf8'));

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
      .map((p) => (p.startsWith('@') ? p.split('/').slice(0, 2).join('/') : (p.split('/')[0] as string))),
  );
  return { files: Object.keys(inputs), packages };
}

describe('paceline/client import graph', () => {
  it('reaches no CDK, emulator, local-runtime, CLI, function or CDK-app module', async () => {
    const { files, packages } = await graph();
    expect(files).toContain('packages/client/src/index.ts');
    expect(files.filter((f) => /^(cdk|local|test|bench|sim|functions|cli)\//.test(f))).toEqual([]);
    const forbidden = [...packages].filter((p) =>
      /^(aws-cdk-lib|aws-cdk|constructs|cdk-nag|dynalite|kinesalite|s3rver|esbuild|vitest|tsx|@aws-lambda-powertools\/.*|@middy\/.*|@aws-sdk\/client-(s3|sqs|elasticache)|aws-kinesis-agg)$/.test(
        p,
      ),
    );
    expect(forbidden).toEqual([]);
    expect(packages.has('ioredis')).toBe(true); // the graph is real: the client does use Redis
  }, 60_000);

  it("the package's dependencies are exactly what the graph imports, at the repository's versions", async () => {
    const { packages } = await graph();
    const client = read('packages/client/package.json') as { dependencies: Record<string, string> };
    const root = read('package.json') as { dependencies: Record<string, string> };
    expect(Object.keys(client.dependencies).sort()).toEqual([...packages].sort());
    for (const [name, version] of Object.entries(client.dependencies)) {
      expect(version, name).toBe(root.dependencies[name]);
    }
  }, 60_000);
});
