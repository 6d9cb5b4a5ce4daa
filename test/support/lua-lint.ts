/**
 * A lint of Lua scripts by redis-server's own Lua (5.1): the script is compiled inside Redis
 * (`loadstring`) and its bytecode (`string.dump`) read here for the globals it reads
 * (`GETGLOBAL`) and writes (`SETGLOBAL`). Redis runs scripts in a sandbox where an unknown global
 * fails only when the line runs, and a misspelt local, or a `--@const` a script uses but never
 * declares, compiles to exactly such a read: the lint finds it before any test reaches that line.
 */
import type { RedisClient } from '../../shared/redis/connect.js';

/** The globals a Redis script may read: Redis's API, its libraries, and Lua's base functions. */
export const REDIS_LUA_GLOBALS: ReadonlySet<string> = new Set([
  'KEYS',
  'ARGV',
  'redis',
  'string',
  'table',
  'math',
  'bit',
  'cjson',
  'cmsgpack',
  'struct',
  'tonumber',
  'tostring',
  'type',
  'unpack',
  'pairs',
  'ipairs',
  'next',
  'select',
  'error',
  'assert',
  'pcall',
  'xpcall',
  'rawget',
  'rawset',
  'rawequal',
  'setmetatable',
  'getmetatable',
]);

/** A global a script reads or writes, with its line in the text compiled. */
export interface GlobalAccess {
  readonly kind: 'read' | 'write';
  readonly name: string;
  readonly line: number;
}

/** Compiles `lua` in Redis and returns its bytecode (`string.dump`); rejects with Lua's compile error. */
export async function compileInRedis(redis: RedisClient, lua: string, chunkName: string): Promise<Buffer> {
  // loadstring does not skip a first line starting with '#' (Redis strips the shebang itself):
  // blank it, keeping the line numbers.
  const text = lua.startsWith('#!') ? lua.replace(/^[^\n]*/, '') : lua;
  // The dump comes back hex-encoded: a text reply through the client's usual (UTF-8) path.
  const hex = (await redis.eval(
    "local f, e = loadstring(ARGV[1], ARGV[2]) if not f then return redis.error_reply('ERR ' .. e) end " +
      "return (string.gsub(string.dump(f), '.', function(c) return string.format('%02x', string.byte(c)) end))",
    0,
    text,
    `=${chunkName}`,
  )) as string;
  return Buffer.from(hex, 'hex');
}

const GETGLOBAL = 5;
const SETGLOBAL = 7;

/** The globals read and written by a Lua 5.1 function dump (of a 64-bit little-endian build). */
export function globalAccesses(dump: Buffer): GlobalAccess[] {
  const header = [0x1b, 0x4c, 0x75, 0x61, 0x51, 0, 1, 4, 8, 4, 8, 0];
  header.forEach((b, i) => {
    if (dump[i] !== b)
      throw new Error(`not a Lua 5.1 dump of a 64-bit little-endian build (byte ${i}: ${dump[i]})`);
  });
  let at = header.length;
  const int = () => {
    const v = dump.readInt32LE(at);
    at += 4;
    return v;
  };
  const string = (): string | null => {
    const n = Number(dump.readBigUInt64LE(at));
    at += 8;
    if (n === 0) return null;
    const s = dump.toString('latin1', at, at + n - 1);
    at += n;
    return s;
  };
  const found: GlobalAccess[] = [];
  const fn = () => {
    string(); // source
    at += 8 + 4; // line defined, last line defined, upvalues, parameters, vararg, stack size
    const code: number[] = [];
    for (let i = 0, n = int(); i < n; i++) code.push(int() >>> 0);
    const constants: (string | null)[] = [];
    for (let i = 0, n = int(); i < n; i++) {
      const type = dump[at++];
      if (type === 4) {
        constants.push(string());
        continue;
      }
      constants.push(null);
      if (type === 1) at += 1;
      else if (type === 3) at += 8;
      else if (type !== 0) throw new Error(`unknown constant type ${type} at byte ${at - 1}`);
    }
    for (let i = 0, n = int(); i < n; i++) fn();
    const lines: number[] = [];
    for (let i = 0, n = int(); i < n; i++) lines.push(int());
    for (let i = 0, n = int(); i < n; i++) {
      string(); // a local's name, then the range of code where it is live
      at += 8;
    }
    for (let i = 0, n = int(); i < n; i++) string();
    code.forEach((ins, pc) => {
      const op = ins & 0x3f;
      if (op !== GETGLOBAL && op !== SETGLOBAL) return;
      found.push({
        kind: op === GETGLOBAL ? 'read' : 'write',
        name: String(constants[ins >>> 14]),
        line: lines[pc] ?? 0,
      });
    });
  };
  fn();
  if (at !== dump.length) throw new Error(`Lua dump: ${dump.length - at} bytes left after the main function`);
  return found;
}

/** The lint's findings for `lua`: every global write, every read of a global Redis does not provide. */
export async function lintLua(redis: RedisClient, lua: string, chunkName: string): Promise<string[]> {
  const accesses = globalAccesses(await compileInRedis(redis, lua, chunkName));
  return accesses
    .filter((a) => a.kind === 'write' || !REDIS_LUA_GLOBALS.has(a.name))
    .map((a) => `${chunkName}:${a.line}: ${a.kind === 'write' ? 'writes' : 'reads'} global '${a.name}'`);
}
