/**
 * The product's Lua scripts: one table ({@link SCRIPTS}) naming every script Paceline runs in
 * Redis, its `.lua` file in this folder and its key count. Both ways of calling a script read it:
 * ioredis commands ({@link defineScripts}: `defineCommand` under the script's name) and the raw
 * RESP caller ({@link rawScriptOf}, shared/redis/resp/script-caller.ts), so the two send the same text.
 *
 * A file is Lua as Redis runs it, plus two directives, each a Lua comment on a line of its own
 * (so the file is valid Lua as it is):
 *
 * - `--@include <fragment>.lua` — replaced by that fragment's text (a file of this folder listed
 *   in {@link FRAGMENTS}, not a script of its own; code several scripts share);
 * - `--@const NAME` — replaced by `local NAME = <value>`, the value of the TypeScript constant
 *   {@link SCRIPT_CONSTANTS}`.NAME` (imported from its domain module, its one definition). It must
 *   come before the script's first statement.
 *
 * Anything else starting with `--@`, a constant or fragment the registry does not know, a fragment
 * with directives of its own: {@link resolveLua} throws, naming the file and line. The files reach
 * the code through `#lua-files` (package.json `imports`): read from disk beside this module when
 * the TypeScript runs from the repository (files.ts), embedded as text in bundles (files.bundled.ts,
 * bundling.ts). `test/integration/redis/lua-scripts.test.ts` loads every script into redis-server
 * (`SCRIPT LOAD`), checks its globals, and compares this table with the files on disk.
 */
import { luaFile } from '#lua-files';
import { CAP_LOG_MIN_LOG_BYTES } from '../../counting/cap-log.js';
import { MAX_SLOT_STEPS, RELEASE_DECAY, RELEASE_MIN_SLOTS } from '../../spend/release.js';
import type { RedisClient } from '../connect.js';
import { type RawScript, rawScript } from '../resp/script-caller.js';

/** The TypeScript constants a script may receive with `--@const NAME` (numbers only). */
export const SCRIPT_CONSTANTS = {
  CAP_LOG_MIN_LOG_BYTES,
  MAX_SLOT_STEPS,
  RELEASE_DECAY,
  RELEASE_MIN_SLOTS,
} as const satisfies Readonly<Record<string, number>>;

/** A script of the registry. */
export interface ScriptSpec {
  /** Its file in shared/redis/scripts/. */
  readonly file: string;
  /** The number of its keys; absent when each call says (ioredis: the first argument). */
  readonly numberOfKeys?: number;
}

/**
 * Every Lua script of the product, by its ioredis command name (the caller's documentation of
 * KEYS, ARGV and reply is on the command's declaration; each file's header repeats it).
 */
export const SCRIPTS = {
  /** Batched, deduplicated action ingest (shared/counting/store.ts). */
  countingIngest: { file: 'counting-ingest.lua', numberOfKeys: 2 },
  /** The pacer's fenced claim of a shard's tick (shared/pacing/publisher.ts). */
  ppClaim: { file: 'pacing-claim.lua', numberOfKeys: 2 },
  /** One fenced batch of a tick's publish (shared/pacing/publisher.ts). */
  ppPublish: { file: 'pacing-publish.lua' },
  /** Merge of a region's allocation into a plan-day (shared/spend/allocation-script.ts). */
  spendAlloc: { file: 'spend-alloc.lua', numberOfKeys: 1 },
  /** Removal of a plan-day's allocation fields (shared/spend/allocation-script.ts). */
  spendAllocClear: { file: 'spend-alloc-clear.lua', numberOfKeys: 1 },
  /** A win/loss notice applied exactly once (shared/spend/live-counters.ts). */
  spendApply: { file: 'spend-apply.lua', numberOfKeys: 2 },
  /** A plan-day (re)initialised from the ledger (shared/spend/live-counters.ts, reconcile.ts). */
  spendInit: { file: 'spend-init.lua', numberOfKeys: 3 },
  /** The guard's settle and lease (shared/spend/live-counters.ts). */
  spendLease: { file: 'spend-lease.lua', numberOfKeys: 1 },
  /** Release of a rebuild lock that is still ours (shared/spend/reconcile.ts). */
  spendUnlock: { file: 'spend-unlock.lua', numberOfKeys: 1 },
} as const satisfies Readonly<Record<string, ScriptSpec>>;

/** Files of this folder that scripts include (`--@include`); not scripts of their own. */
export const FRAGMENTS: readonly string[] = [
  'sum-live.lua',
  'live-held.lua',
  'counting-days.lua',
  'counting-caplog.lua',
];

/** A script's name (its ioredis command). */
export type ScriptName = keyof typeof SCRIPTS;

/** The scripts whose key count is fixed (the raw caller needs it). */
export type FixedKeysScriptName = {
  [K in ScriptName]: (typeof SCRIPTS)[K] extends { readonly numberOfKeys: number } ? K : never;
}[ScriptName];

/** A script ready to send. */
export interface LuaScript {
  readonly name: ScriptName;
  readonly file: string;
  /** The text Redis runs: the file with its directives resolved. */
  readonly lua: string;
  readonly numberOfKeys: number | undefined;
}

/** What {@link resolveLua} resolves directives with. */
export interface LuaDirectiveValues {
  readonly constants: Readonly<Record<string, number>>;
  /** Names `--@include` accepts. */
  readonly fragments: readonly string[];
  /** A fragment's text. */
  readonly read: (file: string) => string;
}

const DIRECTIVE = /^--@(\S*)(?:[ \t]+(.*?))?[ \t]*$/;

/**
 * `text` (the file `file`) with its `--@include` and `--@const` lines replaced (see the module
 * comment). Throws an Error naming `file`, the line and the fix for anything it cannot resolve.
 */
export function resolveLua(file: string, text: string, values: LuaDirectiveValues): string {
  const lines = text.split('\n');
  const declared = new Set<string>();
  let statementSeen = false;
  const out: string[] = [];
  lines.forEach((line, i) => {
    const where = `${file}:${i + 1}`;
    const directive = DIRECTIVE.exec(line);
    if (directive === null) {
      const trimmed = line.trim();
      if (trimmed !== '' && !trimmed.startsWith('--') && !(i === 0 && trimmed.startsWith('#!')))
        statementSeen = true;
      out.push(line);
      return;
    }
    const [, kind, argument = ''] = directive;
    if (kind === 'const') {
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(argument))
        throw new Error(`${where}: '--@const ${argument}' needs one Lua name (--@const NAME)`);
      if (statementSeen)
        throw new Error(
          `${where}: '--@const ${argument}' after the script's first statement; move it to the top`,
        );
      if (declared.has(argument)) throw new Error(`${where}: '--@const ${argument}' is declared twice`);
      const value = values.constants[argument];
      if (value === undefined)
        throw new Error(
          `${where}: '--@const ${argument}' has no value: add ${argument} to SCRIPT_CONSTANTS in ` +
            'shared/redis/scripts/registry.ts (imported from where the TypeScript defines it)',
        );
      if (!Number.isFinite(value))
        throw new Error(`${where}: '--@const ${argument}' is ${value}; only finite numbers can be inlined`);
      declared.add(argument);
      out.push(`local ${argument} = ${String(value)}`);
      return;
    }
    if (kind === 'include') {
      if (!values.fragments.includes(argument))
        throw new Error(
          `${where}: '--@include ${argument}' names no fragment; fragments: ${values.fragments.join(', ')} ` +
            '(FRAGMENTS in shared/redis/scripts/registry.ts)',
        );
      const fragment = values.read(argument).replace(/\n$/, '');
      const nested = fragment.split('\n').findIndex((l) => DIRECTIVE.test(l));
      if (nested >= 0)
        throw new Error(`${argument}:${nested + 1}: a fragment holds no directives (included from ${where})`);
      statementSeen = true;
      out.push(fragment);
      return;
    }
    throw new Error(`${where}: unknown directive '--@${kind}' (known: --@const NAME, --@include FILE.lua)`);
  });
  return out.join('\n');
}

const resolved = new Map<ScriptName, LuaScript>();
const raw = new Map<ScriptName, RawScript>();

/** The script `name`, its directives resolved (once per process). Throws as {@link resolveLua}. */
export function luaScript(name: ScriptName): LuaScript {
  let script = resolved.get(name);
  if (script === undefined) {
    const spec: ScriptSpec = SCRIPTS[name];
    const lua = resolveLua(spec.file, luaFile(spec.file), {
      constants: SCRIPT_CONSTANTS,
      fragments: FRAGMENTS,
      read: luaFile,
    });
    script = { name, file: spec.file, lua, numberOfKeys: spec.numberOfKeys };
    resolved.set(name, script);
  }
  return script;
}

/** The script `name` prepared for {@link RawScriptCaller.call} (once per process). */
export function rawScriptOf(name: FixedKeysScriptName): RawScript {
  let script = raw.get(name);
  if (script === undefined) {
    const { lua, numberOfKeys } = luaScript(name);
    script = rawScript(name, lua, numberOfKeys as number);
    raw.set(name, script);
  }
  return script;
}

/**
 * Registers `names` on `redis` as ioredis commands of the same names (`defineCommand`: EVALSHA,
 * EVAL on `NOSCRIPT`). Idempotent: defining a script again replaces it with the same text.
 */
export function defineScripts(redis: RedisClient, ...names: readonly ScriptName[]): void {
  for (const name of names) {
    const { lua, numberOfKeys } = luaScript(name);
    redis.defineCommand(name, numberOfKeys === undefined ? { lua } : { numberOfKeys, lua });
  }
}
