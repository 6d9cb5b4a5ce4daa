/**
 * esbuild bundles (local/worker/bundle.ts): handlers keep their names (Lambda's `errorType`); the
 * simulator's bundle does without (cli/common.ts `ensureSimProcess`): no name helper runs for
 * every function object the hot paths create. A bundle is reused until one of its sources changes.
 * A bundle carries the Lua scripts as text (it runs without the `.lua` files beside it).
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { bundleModule } from '../../../local/worker/bundle.js';
import { luaScript, SCRIPTS, type ScriptName } from '../../../shared/redis/scripts/registry.js';

const root = mkdtempSync(join(tmpdir(), 'pl-bundle-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
writeFileSync(
  join(root, 'entry.ts'),
  'export class QuotaError extends Error {}\nexport const make = (n: number) => () => n + 1;\n',
);

describe('bundleModule', () => {
  it('keeps names by default and drops them with keepNames: false (a separate bundle)', async () => {
    const named = await bundleModule('entry.ts', root);
    const plain = await bundleModule('entry.ts', root, { keepNames: false });
    expect(plain).not.toBe(named);
    expect(readFileSync(named, 'utf8')).toContain('__name');
    expect(readFileSync(plain, 'utf8')).not.toContain('__name');
    const mod = (await import(plain)) as { make: (n: number) => () => number };
    expect(mod.make(41)()).toBe(42);
  });

  it('is reused until a source changes', async () => {
    const first = await bundleModule('entry.ts', root, { keepNames: false });
    const built = statSync(first).mtimeMs;
    expect(statSync(await bundleModule('entry.ts', root, { keepNames: false })).mtimeMs).toBe(built);
    writeFileSync(join(root, 'entry.ts'), 'export const make = (n: number) => () => n + 2;\n');
    const later = new Date(Date.now() + 5_000);
    utimesSync(join(root, 'entry.ts'), later, later);
    const again = await bundleModule('entry.ts', root, { keepNames: false });
    expect(readFileSync(again, 'utf8')).toMatch(/n\s*\+\s*2/);
  });

  it('carries the Lua scripts as text: the same scripts as from disk, files.ts not in it', async () => {
    const scripts = fileURLToPath(new URL('../../../shared/redis/scripts/', import.meta.url));
    writeFileSync(
      join(root, 'lua-entry.ts'),
      `import { luaScript, SCRIPTS } from '${join(scripts, 'registry.ts')}';\n` +
        'export const texts = Object.fromEntries(Object.keys(SCRIPTS).map((n) => [n, luaScript(n as never).lua]));\n',
    );
    const bundle = await bundleModule('lua-entry.ts', root, { keepNames: false });
    const { texts } = (await import(bundle)) as { texts: Record<string, string> };
    const names = Object.keys(SCRIPTS) as ScriptName[];
    expect(Object.keys(texts)).toEqual(names);
    for (const name of names) expect(texts[name], name).toBe(luaScript(name).lua);
    const meta = JSON.parse(readFileSync(bundle.replace(/\.mjs$/, '.meta.json'), 'utf8')) as {
      inputs: Record<string, number>;
    };
    const inputs = Object.keys(meta.inputs).map((i) => resolve(root, i));
    for (const file of readdirSync(scripts).filter((f) => f.endsWith('.lua')))
      expect(inputs, file).toContain(join(scripts, file));
    expect(inputs).toContain(join(scripts, 'files.bundled.ts'));
    expect(inputs).not.toContain(join(scripts, 'files.ts'));
  });
});
