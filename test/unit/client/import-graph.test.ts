/**
 * The client entry's import graph (esbuild's resolver, every file and package it reaches): no
 * CDK, no emulator, nothing from the local runtime or the CDK app. An ad server importing
 * `paceline/client` must not load aws-cdk-lib (tens of MB, seconds of start-up) or test servers.
 * The packed-tarball test checks the same at run time in a scratch project.
 */
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { describe, expect, it } from 'vitest';

const repoRoot = fileURLToPath(new URL('../../..', import.meta.url));

describe('paceline/client import graph', () => {
  it('reaches no CDK, emulator, local-runtime or CDK-app module', async () => {
    const result = await build({
      entryPoints: [`${repoRoot}client/index.ts`],
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
    const files = Object.keys(inputs);
    expect(files).toContain('client/index.ts');
    expect(files.filter((f) => /^(cdk|local|test|bench|sim|functions|cli)\//.test(f))).toEqual([]);
    const packages = new Set(
      Object.values(inputs).flatMap((i) => i.imports.filter((x) => x.external).map((x) => x.path)),
    );
    const forbidden = [...packages].filter((p) =>
      /^(aws-cdk-lib|aws-cdk|constructs|cdk-nag|dynalite|kinesalite|s3rver|esbuild|vitest|tsx)(\/|$)/.test(p),
    );
    expect(forbidden).toEqual([]);
    expect(packages.has('ioredis')).toBe(true); // the graph is real: the client does use Redis
  }, 60_000);
});
