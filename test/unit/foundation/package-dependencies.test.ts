/**
 * package.json `dependencies` are exactly what the runtime code imports: what ships (the packed
 * client: client/ and the shared/ modules it compiles in) and what the Lambda bundles and the
 * operator CLI load (functions/, cli/). Everything the CDK app, the local runner, the tests and
 * the tools need is a devDependency, so `npm install` of the tarball does not pull in
 * aws-cdk-lib (≈ 190 MB) or an emulator. The pack test (test/integration/client/pack.test.ts)
 * checks the same on a real tarball.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../..', import.meta.url));
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
};

/** Source files under a runtime directory (tests and build output excluded). */
function sources(dir: string): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && /\.(ts|mts|mjs|js)$/.test(e.name) && !e.name.endsWith('.d.ts'))
    .map((e) => join(e.parentPath, e.name));
}

/**
 * The package a bare specifier names (`@scope/name/sub` → `@scope/name`), or undefined (relative,
 * Node built-in, or `#…`: the repository's own package.json `imports`).
 */
function packageOf(specifier: string): string | undefined {
  if (/^(\.|\/|#|node:)/.test(specifier)) return undefined;
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}

interface Imported {
  readonly file: string;
  readonly pkg: string;
  /** `import type …` / `export type … from`: erased by the compiler, needs only @types at build. */
  readonly typeOnly: boolean;
}

/** Every bare import in the runtime directories (static, multi-line, re-exports, dynamic). */
function runtimeImports(): Imported[] {
  const out: Imported[] = [];
  for (const dir of ['shared', 'functions', 'cli', 'packages/client/src']) {
    for (const file of sources(dir)) {
      const text = readFileSync(file, 'utf8');
      for (const m of text.matchAll(/\b(import|export)(\s+type)?\s[^;'"]*?\bfrom\s*['"]([^'"]+)['"]/g)) {
        const name = packageOf(m[3] as string);
        if (name) out.push({ file: file.slice(root.length), pkg: name, typeOnly: m[2] !== undefined });
      }
      for (const m of text.matchAll(
        /\bimport\s*\(\s*['"]([^'"]+)['"]\s*\)|^\s*import\s+['"]([^'"]+)['"]/gm,
      )) {
        const name = packageOf((m[1] ?? m[2]) as string);
        if (name) out.push({ file: file.slice(root.length), pkg: name, typeOnly: false });
      }
    }
  }
  return out;
}

/**
 * The one runtime import that is deliberately a devDependency: `cli/paceline.mjs` (the `bin`)
 * registers tsx to run the TypeScript CLI, which only works in a checkout (docs/client.md, Limits).
 */
const checkoutOnly = new Set(['tsx']);

describe('package.json dependencies', () => {
  const imports = runtimeImports();

  it('finds the runtime imports (the scan itself works)', () => {
    expect(imports.some((i) => i.pkg === 'ioredis' && i.file.startsWith('shared/'))).toBe(true);
    expect(imports.some((i) => i.pkg === '@aws-sdk/client-dynamodb')).toBe(true);
  });

  it('every dependency is imported by runtime code (build-only packages are devDependencies)', () => {
    const used = new Set(imports.filter((i) => !i.typeOnly).map((i) => i.pkg));
    expect(Object.keys(pkg.dependencies).filter((d) => !used.has(d))).toEqual([]);
    for (const buildOnly of ['aws-cdk-lib', 'constructs', 'cdk-nag', 'aws-cdk', 'chart.js', 'esbuild']) {
      expect(pkg.dependencies).not.toHaveProperty(buildOnly);
    }
  });

  it('every runtime import is a dependency (type-only imports need only their @types devDependency)', () => {
    const missing = imports.filter((i) =>
      i.typeOnly
        ? !(i.pkg in pkg.dependencies) && !(`@types/${i.pkg}` in pkg.devDependencies)
        : !(i.pkg in pkg.dependencies) && !checkoutOnly.has(i.pkg),
    );
    expect(missing).toEqual([]);
  });

  it('no package is listed twice (dependencies and devDependencies)', () => {
    expect(Object.keys(pkg.dependencies).filter((d) => d in pkg.devDependencies)).toEqual([]);
  });
});
