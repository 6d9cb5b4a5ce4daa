/**
 * Lua script calls (`EVALSHA`) over raw RESP connections, for the two scripts on the money path's
 * hot loop: the budget guard's lease/settle call (one per plan every few bids, from the ad
 * server's request path) and track-spend's apply (one per notice and plan). Through ioredis each
 * call costs a `Command` with its argument array, promise and callbacks, the `Script` wrapper's
 * second promise, a RESP string built argument by argument and a reply object; written here as
 * one string per call and answered from the reply bytes, the caller's CPU per call is about 2.5×
 * lower (`npm run bench -- spend`, `scriptCalls`; docs/spend.md, "Script calls").
 *
 * - One connection per node (shared/redis/resp/connection.ts: TLS and AUTH as the client has them,
 *   one write per event-loop turn, as ioredis's auto-pipelining does), answered in order.
 * - Calls run in the order issued: a script's first call on a connection is an `EVAL` with its body
 *   (which loads it), the next ones `EVALSHA`. An `EVALSHA` answered `NOSCRIPT` would be sent
 *   again after the calls written meanwhile, and the order of the calls (the simulator's outcome
 *   with it) would depend on when that reply is read (docs/pacing-quality.md, "Deterministic
 *   whatever the host's timing").
 * - `NOSCRIPT` (the node's scripts `SCRIPT FLUSH`ed while the connection stayed open): the call is
 *   sent again as `EVAL` with the script's body, on the same connection, which loads it for the
 *   calls after it — what ioredis's `defineCommand` does. The script did not run, so nothing runs
 *   twice; the calls refused with it are sent again in their order.
 * - A `MOVED` / `ASK` reply, a key whose slot has no known owner, a client that is not ready and a
 *   closed caller go through ioredis (`EVAL`), which follows redirects. The script did not run on
 *   the node that redirected.
 * - Any other error reply (the script's own error, `OOM`, `READONLY`, `BUSY`) rejects that call
 *   with `RawScriptError` carrying the node's line, as ioredis rejects with its ReplyError.
 * - The layer's timeout policy: a node silent for `timeoutMs` while calls wait (a hung node, a
 *   script looping past the limit) fails them with `RawReadTimeoutError`; a lost connection with
 *   `RawConnectionError`. Whether those calls ran is unknown, as with any client: the callers'
 *   retry contracts (track-spend's idempotent apply, the guard's settle on the next call) hold.
 *   Nothing is re-sent after a reconnect; the next call opens a new connection.
 */
import { createHash } from 'node:crypto';
import type { RedisClient } from '../connect.js';
import { bulk, type RespConnection, type RespRequest } from './connection.js';
import { type RawRedisError, RawScriptError } from './errors.js';
import { errorLineOf, type RespValue, replyValue } from './folds.js';
import { nodeOfKey } from './ioredis-adapter.js';
import { RespNodes } from './nodes.js';
import { timeoutMsOption } from './timeout.js';

export type { RespValue } from './folds.js';

/** A Lua script as the raw caller sends it (built once per script: {@link rawScript}). */
export interface RawScript {
  /** Name for error messages (the ioredis command name). */
  readonly name: string;
  readonly lua: string;
  readonly numberOfKeys: number;
  /** RESP of `EVALSHA <sha1> <numberOfKeys>` without the array header. */
  readonly evalshaHead: string;
  /** RESP of `EVAL <lua> <numberOfKeys>` without the array header (the `NOSCRIPT` retry). */
  readonly evalHead: string;
}

/**
 * Prepares `lua` for {@link RawScriptCaller.call} (its SHA1 and the commands' fixed parts). The
 * product's scripts come prepared from the script registry (`rawScriptOf` in
 * shared/redis/scripts/registry.ts), which gives ioredis the same text.
 */
export function rawScript(name: string, lua: string, numberOfKeys: number): RawScript {
  const sha = createHash('sha1').update(lua).digest('hex');
  const keys = bulk(String(numberOfKeys));
  return {
    name,
    lua,
    numberOfKeys,
    evalshaHead: `${bulk('EVALSHA')}${bulk(sha)}${keys}`,
    evalHead: `${bulk('EVAL')}${bulk(lua)}${keys}`,
  };
}

/** Options of {@link RawScriptCaller}. */
export interface RawScriptCallerOptions {
  /** Longest silence of a node while calls wait, ms (the layer's timeout policy). @default 1000 */
  readonly timeoutMs?: number;
}

/** One script call waiting for its reply. */
class ScriptCall implements RespRequest {
  constructor(
    readonly script: RawScript,
    /** Keys and arguments as RESP bulk strings (kept for the `NOSCRIPT` retry). */
    readonly tail: string,
    /** Number of keys + arguments. */
    readonly count: number,
    readonly keys: readonly string[],
    readonly args: readonly (string | number)[],
    readonly resolve: (value: RespValue) => void,
    readonly reject: (error: Error) => void,
    private readonly caller: RawScriptCaller,
    private readonly connection: RespConnection,
  ) {}

  reply(buf: Buffer, tokens: Int32Array): boolean {
    const line = errorLineOf(buf, tokens);
    if (line === null) this.resolve(replyValue(buf, tokens));
    else if (line.startsWith('NOSCRIPT')) {
      // Not run (the node's scripts were flushed): sent again with the body, which loads the
      // script for the calls after it; the calls written meanwhile were refused too and are sent
      // again in the same order.
      this.connection.push(this, `*${this.count + 3}\r\n${this.script.evalHead}${this.tail}`);
    } else if (line.startsWith('MOVED ') || line.startsWith('ASK ')) this.caller.viaClient(this);
    else
      this.reject(new RawScriptError(`Redis refused script ${this.script.name} on ${this.keys[0]}: ${line}`));
    return true;
  }

  fail(error: RawRedisError): void {
    this.reject(error);
  }

  waiting(): string {
    return `while script ${this.script.name} on ${this.keys[0]} waited`;
  }
}

/** One caller per client for {@link RawScriptCaller.of}. */
const sharedCallers = new WeakMap<RedisClient, RawScriptCaller>();

/** `EVALSHA` over raw connections (see the module comment). */
export class RawScriptCaller {
  /**
   * The caller shared by everything that calls scripts through `client`: one socket per node, so
   * calls issued in order by any component reach Redis in that order. `options` apply when this
   * creates it (the first call for the client).
   */
  static of(client: RedisClient, options: RawScriptCallerOptions = {}): RawScriptCaller {
    let caller = sharedCallers.get(client);
    if (caller === undefined) {
      caller = new RawScriptCaller(client, options);
      sharedCallers.set(client, caller);
    }
    return caller;
  }

  private readonly nodes: RespNodes;

  constructor(
    private readonly client: RedisClient,
    options: RawScriptCallerOptions = {},
  ) {
    // Script replies are a few numbers: a small reused read buffer.
    this.nodes = new RespNodes(client, {
      timeoutMs: timeoutMsOption('RawScriptCaller', options.timeoutMs),
      readBufferBytes: 64 * 1024,
    });
  }

  /** Runs a call through ioredis (`EVAL`, which follows redirects). */
  viaClient(p: ScriptCall): void {
    this.client.eval(p.script.lua, p.script.numberOfKeys, ...p.keys, ...p.args).then(
      (v) => p.resolve(v as RespValue),
      (e: Error) => p.reject(e),
    );
  }

  /**
   * Runs `script` with `keys` (all in one hash slot) and `args`; resolves with its reply, rejects
   * with `RawScriptError` on an error reply (never throws synchronously).
   */
  call(script: RawScript, keys: readonly string[], args: readonly (string | number)[]): Promise<RespValue> {
    return new Promise<RespValue>((resolve, reject) => {
      let tail = '';
      for (const k of keys) tail += bulk(k);
      for (const a of args) {
        if (typeof a === 'string') tail += bulk(a);
        else {
          // A number's decimal form is ASCII: its length is its byte length.
          const text = String(a);
          tail += `$${text.length}\r\n${text}\r\n`;
        }
      }
      try {
        const node = this.nodes.isClosed ? undefined : nodeOfKey(this.client, keys[0] as string);
        const connection = node === undefined ? undefined : this.nodes.connection(node);
        const count = keys.length + args.length;
        const p = new ScriptCall(
          script,
          tail,
          count,
          keys,
          args,
          resolve,
          reject,
          this,
          connection as RespConnection,
        );
        if (connection === undefined) return this.viaClient(p);
        const loaded = connection.scripts;
        // A script's first call on a connection: EVAL with the body, which loads it for the
        // EVALSHAs after it (an EVALSHA answered NOSCRIPT would be re-sent out of order).
        const head = loaded.has(script) ? script.evalshaHead : script.evalHead;
        loaded.add(script);
        connection.push(p, `*${count + 3}\r\n${head}${tail}`);
      } catch (error) {
        reject(error as Error);
      }
    });
  }

  /**
   * Drops the raw sockets; the next call opens new ones (whose first call of each script is an
   * `EVAL`), as after a node restart. For a caller that flushed the node's scripts on purpose (the
   * simulator's Redis restart, tests).
   */
  reconnect(): void {
    this.nodes.reconnect();
  }

  /** Closes the raw sockets (calls after this go through the client). */
  close(): void {
    this.nodes.close();
  }
}
