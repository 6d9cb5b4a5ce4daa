/**
 * The product's Lua scripts (shared/redis/scripts/, the registry in registry.ts) against a real
 * redis-server:
 * - the registry and the files agree: every `.lua` file of the folder is a registered script or
 *   fragment, every registered one has its file, every constant and fragment is used;
 * - every registered script, directives resolved, loads (`SCRIPT LOAD`: Redis compiles it) with the
 *   SHA1 the raw caller sends; every `.lua` file of the repository also parses as it is on disk;
 * - the lint (test/support/lua-lint.ts, compiled by Redis's own Lua): no script reads a global
 *   Redis does not provide or writes one;
 * - both transports run the registry's text: an ioredis command and a raw call each leave that
 *   SHA1 in the script cache;
 * - the checks can fail: a syntax error is refused by `SCRIPT LOAD`, an undeclared constant and a
 *   global write are reported by the lint.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { RawScriptCaller } from '../../../shared/redis/resp/script-caller.js';
import {
  defineScripts,
  type FixedKeysScriptName,
  FRAGMENTS,
  luaScript,
  rawScriptOf,
  SCRIPT_CONSTANTS,
  SCRIPTS,
  type ScriptName,
} from '../../../shared/redis/scripts/registry.js';
import { lintLua } from '../../support/lua-lint.js';
import { useRedis } from '../../support/redis.js';

const repoRoot = fileURLToPath(new URL('../../..', import.meta.url));
const scriptsDir = join(repoRoot, 'shared/redis/scripts');
const names = Object.keys(SCRIPTS) as ScriptName[];
const sha1 = (text: string) => createHash('sha1').update(text).digest('hex');

/** Every `.lua` file of the repository's code folders (not node_modules, not build output). */
function luaFilesOfRepository(): string[] {
  const found: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) {
        if (!['node_modules', 'dist', 'cdk.out'].includes(entry.name) && !entry.name.startsWith('.'))
          walk(path);
      } else if (entry.name.endsWith('.lua')) found.push(relative(repoRoot, path));
    }
  };
  for (const top of ['shared', 'functions', 'local', 'cli', 'sim', 'bench', 'packages', 'cdk'])
    walk(join(repoRoot, top));
  return found.sort();
}

describe('Lua scripts', () => {
  const r = useRedis('standalone');

  it('the registry and the .lua files on disk agree', () => {
    const onDisk = readdirSync(scriptsDir)
      .filter((f) => f.endsWith('.lua'))
      .sort();
    const registered = [...names.map((n) => SCRIPTS[n].file), ...FRAGMENTS].sort();
    expect(registered).toEqual(onDisk);
    expect(new Set(registered).size).toBe(registered.length);
    const texts = names.map((n) => luaScript(n).lua).join('\n');
    for (const constant of Object.keys(SCRIPT_CONSTANTS))
      expect(texts, `${constant} is used by a script`).toMatch(new RegExp(`^local ${constant} = `, 'm'));
    const raw = onDisk.map((f) => readFileSync(join(scriptsDir, f), 'utf8')).join('\n');
    for (const fragment of FRAGMENTS)
      expect(raw, `${fragment} is included`).toContain(`--@include ${fragment}`);
    // Every .lua file of the product is in this folder; the only other is the counting benchmark's.
    expect(luaFilesOfRepository().filter((f) => !f.startsWith('shared/redis/scripts/'))).toEqual([
      'bench/bucket-ingest.lua',
    ]);
  });

  it('loads every registered script into redis-server with the SHA1 the raw caller sends', async () => {
    for (const name of names) {
      const { lua, numberOfKeys } = luaScript(name);
      const sha = (await r.redis.script('LOAD', lua)) as string;
      expect(sha, name).toBe(sha1(lua));
      if (numberOfKeys !== undefined)
        expect(rawScriptOf(name as FixedKeysScriptName).evalshaHead, name).toContain(sha);
    }
    // The resolved texts really differ from the files where directives were resolved.
    expect(luaScript('spendLease').lua).toMatch(/^local MAX_SLOT_STEPS = 16$/m);
    expect(luaScript('spendLease').lua).toContain('local function sumLive(h, kmin)');
    expect(luaScript('spendLease').lua).not.toMatch(/^--@/m);
  });

  it('parses every .lua file of the repository as it is on disk (the directives are comments)', async () => {
    const files = luaFilesOfRepository();
    expect(files.length).toBe(names.length + FRAGMENTS.length + 1);
    for (const file of files) {
      const text = await readFile(join(repoRoot, file), 'utf8');
      await expect(r.redis.script('LOAD', text), file).resolves.toBe(sha1(text));
    }
  });

  it("reads no global but Redis's and writes none (lint by Redis's own Lua compiler)", async () => {
    const findings: string[] = [];
    for (const name of names) findings.push(...(await lintLua(r.redis, luaScript(name).lua, name)));
    for (const file of [...FRAGMENTS.map((f) => `shared/redis/scripts/${f}`), 'bench/bucket-ingest.lua'])
      findings.push(...(await lintLua(r.redis, await readFile(join(repoRoot, file), 'utf8'), file)));
    expect(findings).toEqual([]);
  });

  it("ioredis commands and the raw caller both run the registry's text", async () => {
    await r.redis.script('FLUSH');
    const unlock = sha1(luaScript('spendUnlock').lua);
    const clear = sha1(luaScript('spendAllocClear').lua);
    expect(await r.redis.script('EXISTS', unlock, clear)).toEqual([0, 0]);
    defineScripts(r.redis, 'spendUnlock');
    expect(await r.redis.spendUnlock('ls:{lock}', 'token')).toBe(0);
    await RawScriptCaller.of(r.redis).call(rawScriptOf('spendAllocClear'), ['ls:{state}'], []);
    expect(await r.redis.script('EXISTS', unlock, clear)).toEqual([1, 1]);
  });

  it('the checks fail on a script that would break: a syntax error, an undeclared constant, a global write', async () => {
    await expect(r.redis.script('LOAD', 'local x = = 1')).rejects.toThrow(/Error compiling script/);
    const broken = luaScript('spendLease').lua.replace(/^local MAX_SLOT_STEPS = 16\n/m, '');
    expect(await lintLua(r.redis, broken, 'spendLease')).toEqual([
      expect.stringMatching(/^spendLease:\d+: reads global 'MAX_SLOT_STEPS'$/),
    ]);
    expect(await lintLua(r.redis, 'local a = 1\nb = a\nreturn tonumber(ARGV[1])', 'w')).toEqual([
      "w:2: writes global 'b'",
    ]);
    await expect(lintLua(r.redis, 'return (', 'bad')).rejects.toThrow(/bad:1:/);
  });
});
