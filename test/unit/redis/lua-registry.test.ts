/**
 * The script registry's directives (shared/redis/scripts/registry.ts): `--@const NAME` becomes a
 * local holding the TypeScript constant, `--@include` a fragment's text; everything it cannot
 * resolve is refused with the file, the line and the fix. And the product keeps its Lua in
 * `.lua` files: no TypeScript source of the product holds Lua (redis.call, KEYS[…], ARGV[…]).
 * Loading the scripts into redis-server and the lint: test/integration/redis/lua-scripts.test.ts.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  type LuaDirectiveValues,
  luaScript,
  resolveLua,
  SCRIPTS,
  type ScriptName,
} from '../../../shared/redis/scripts/registry.js';
import { RELEASE_DECAY } from '../../../shared/spend/release.js';

const values: LuaDirectiveValues = {
  constants: { STEPS: 16, DECAY: 0.9, HUGE: Number.POSITIVE_INFINITY },
  fragments: ['lib.lua', 'nested.lua'],
  read: (file) =>
    file === 'lib.lua' ? 'local function twice(x)\n  return 2 * x\nend\n' : '--@const STEPS\nlocal y = 1\n',
};

describe('resolveLua', () => {
  it('turns --@const into a local of the value and --@include into the fragment, line for line', () => {
    const text =
      '#!lua flags=no-writes\n-- header\n--@const STEPS\n--@const DECAY\n--@include lib.lua\nreturn twice(STEPS * DECAY)\n';
    expect(resolveLua('s.lua', text, values)).toBe(
      '#!lua flags=no-writes\n-- header\nlocal STEPS = 16\nlocal DECAY = 0.9\n' +
        'local function twice(x)\n  return 2 * x\nend\nreturn twice(STEPS * DECAY)\n',
    );
  });

  it('leaves a file without directives as it is', () => {
    const text = "return redis.call('GET', KEYS[1]) -- not a directive: --@const X\n";
    expect(resolveLua('s.lua', text, values)).toBe(text);
  });

  it.each([
    [
      '--@const NOPE\nreturn 1',
      /^s\.lua:1: '--@const NOPE' has no value: add NOPE to SCRIPT_CONSTANTS in shared\/redis\/scripts\/registry\.ts/,
    ],
    [
      'local a = 1\n--@const STEPS\nreturn a',
      /^s\.lua:2: '--@const STEPS' after the script's first statement; move it to the top$/,
    ],
    [
      '--@include lib.lua\n--@const STEPS\nreturn 1',
      /^s\.lua:2: '--@const STEPS' after the script's first statement/,
    ],
    ['--@const STEPS\n--@const STEPS\nreturn 1', /^s\.lua:2: '--@const STEPS' is declared twice$/],
    [
      '--@const HUGE\nreturn 1',
      /^s\.lua:1: '--@const HUGE' is Infinity; only finite numbers can be inlined$/,
    ],
    ['--@const\nreturn 1', /^s\.lua:1: '--@const ' needs one Lua name/],
    ['--@const A B\nreturn 1', /^s\.lua:1: '--@const A B' needs one Lua name/],
    [
      '--@include other.lua\nreturn 1',
      /^s\.lua:1: '--@include other\.lua' names no fragment; fragments: lib\.lua, nested\.lua/,
    ],
    [
      '--@include nested.lua\nreturn 1',
      /^nested\.lua:1: a fragment holds no directives \(included from s\.lua:1\)$/,
    ],
    [
      '--@define X 1\nreturn 1',
      /^s\.lua:1: unknown directive '--@define' \(known: --@const NAME, --@include FILE\.lua\)$/,
    ],
  ])('refuses %j', (text, message) => {
    expect(() => resolveLua('s.lua', text, values)).toThrow(message);
  });
});

describe('the registry', () => {
  it('resolves every script from its file, constants from their TypeScript definitions', () => {
    for (const name of Object.keys(SCRIPTS) as ScriptName[]) {
      const script = luaScript(name);
      expect(script.lua.length, name).toBeGreaterThan(0);
      expect(script.numberOfKeys).toBe((SCRIPTS[name] as { numberOfKeys?: number }).numberOfKeys);
    }
    expect(luaScript('spendLease').lua).toContain(`\nlocal RELEASE_DECAY = ${RELEASE_DECAY}\n`);
    expect(luaScript('countingIngest').lua.startsWith('#!lua flags=allow-cross-slot-keys\n')).toBe(true);
    expect(luaScript('spendLease')).toBe(luaScript('spendLease'));
  });
});

describe('Lua lives in .lua files', () => {
  const root = fileURLToPath(new URL('../../..', import.meta.url));
  const sources: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) {
        if (!['node_modules', 'dist', 'cdk.out'].includes(entry.name)) walk(path);
      } else if (/\.[cm]?[jt]s$/.test(entry.name)) sources.push(path);
    }
  };
  for (const top of ['shared', 'functions', 'local', 'cli', 'sim', 'bench', 'cdk', 'packages/client'])
    walk(join(root, top));

  it('no TypeScript or JavaScript source of the product holds Lua', () => {
    expect(sources.length).toBeGreaterThan(100);
    const lua = /redis\.p?call\(|\bKEYS\[\d|\bARGV\[\d/;
    expect(sources.filter((f) => lua.test(readFileSync(f, 'utf8'))).map((f) => relative(root, f))).toEqual(
      [],
    );
  });
});
