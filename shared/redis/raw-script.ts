/**
 * Lua script calls (`EVALSHA`) over raw RESP connections, for the two scripts on the money path's
 * hot loop: the budget guard's lease/settle call (one per plan every few bids, from the ad
 * server's request path) and track-spend's apply (one per notice and plan). Through ioredis each
 * call costs a `Command` with its argument array, promise and callbacks, the `Script` wrapper's
 * second promise, a RESP string built argument by argument and a reply object; written here as
 * one string per call and answered from the reply bytes, the caller's CPU per call is about 2.5×
 * lower (`npm run bench -- spend`, `scriptCalls`; docs/spend.md, "Script calls").
 *
 * - One socket per Redis node, opened lazily with the client's TLS and AUTH settings
 *   (shared/redis/raw-connection.ts); calls are written in batches (one write per event-loop turn,
 *   as ioredis's auto-pipelining does) and answered in order.
 * - Calls run in the order issued: a script's first call on a connection is an `EVAL` with its body
 *   (which loads it), the next ones `EVALSHA`. An `EVALSHA` answered `NOSCRIPT` would be sent
 *   again after the calls written meanwhile, and the order of the calls (the simulator's outcome
 *   with it) would depend on when that reply is read (docs/pacing-quality.md, "Deterministic
 *   whatever the host's timing").
 * - `NOSCRIPT` (the node's scripts `SCRIPT FLUSH`ed while the connection stayed open): the call is
 *   sent again as `EVAL` with the script's body, on the same connection, which loads it for the
 *   calls after it — what ioredis's `defineCommand` does. The script did not run, so nothing runs
 *   twice; the calls refused with it are sent again in their order. A restarted node drops the
 *   connection, and the next one starts with `EVAL` again.
 * - Cluster routing uses the client's slot table. A `MOVED` / `ASK` reply (resharding, failover),
 *   a key whose slot has no known owner, a client that is not ready (connecting, reconnecting: its
 *   offline queue and retry policy apply) and a closed caller go through ioredis (`EVAL`), which
 *   follows redirects. The script did not run on the node that redirected.
 * - Any other error reply (the script's own error, `OOM`, `READONLY`, `BUSY`) rejects that call
 *   with {@link RawScriptError} carrying the node's line, as ioredis rejects with its ReplyError.
 * - A lost connection rejects the calls waiting on it (whether they ran is unknown, as with any
 *   client: the callers' retry contracts — track-spend's idempotent apply, the guard's settle on
 *   the next call — are the same as for an ioredis call that failed); the next call opens a new
 *   connection. Unlike ioredis (`autoResendUnfulfilledCommands`) nothing is re-sent after a
 *   reconnect. No timeout of its own, like the application's client: a hung node holds its calls
 *   until TCP gives up (the guard then stops bidding on the plans waiting, fail-closed).
 * - A socket is referenced only while calls wait on it; the caller closes when the client ends.
 */

import { createHash } from 'node:crypto';
import { Cluster } from 'ioredis';
import { PacelineError } from '../errors.js';
import { type RedisClient, slotOf } from './connect.js';
import {
  bulk,
  openRequestConnection,
  type RawConnection,
  type RequestQueue,
  standaloneNode,
} from './raw-connection.js';
import { parseIntBytes } from './raw-hgetall.js';

/** A reply as a script returns it: integer, bulk string, nil, array. */
export type RespValue = number | string | null | RespValue[];

/** An error reply to a raw script call (the node's error line, e.g. `ERR user_script:3: …`). */
export class RawScriptError extends PacelineError {
  override readonly name = 'RawScriptError';
  override readonly code = 'redis.script';
}

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

interface Pending {
  readonly script: RawScript;
  /** Keys and arguments as RESP bulk strings (kept for the `NOSCRIPT` retry). */
  readonly tail: string;
  /** Number of keys + arguments. */
  readonly count: number;
  readonly keys: readonly string[];
  readonly args: readonly (string | number)[];
  readonly resolve: (value: RespValue) => void;
  readonly reject: (error: Error) => void;
}

/** {@link NodeCaller.parse}'s result when the reply is not complete yet (wait for more bytes). */
const INCOMPLETE = -1;
/** {@link NodeCaller.parse}'s result when the bytes are not RESP (the connection was dropped). */
const PROTOCOL_ERROR = -2;

/** Per-node state: the connection, the calls waiting for replies, the bytes of a split reply. */
class NodeCaller {
  readonly connection: RawConnection;
  private readonly queue: RequestQueue<Pending>;
  /** The start of a reply split across chunks (copied: the read buffer is reused). */
  private carry: Buffer | null = null;
  /** The value of the reply parsed last ({@link parse}). */
  private value: RespValue = null;
  /** Set when the reply parsed last was an error line (its text). */
  private errorLine: string | null = null;
  /** Scripts this connection has sent with their body (the node holds them unless flushed). */
  private readonly loaded = new Set<RawScript>();

  constructor(
    client: RedisClient,
    node: string,
    /** Where a redirected call is retried: through ioredis. */
    private readonly redirect: (p: Pending) => void,
  ) {
    ({ connection: this.connection, queue: this.queue } = openRequestConnection<Pending>(
      client,
      node,
      {
        onData: (chunk) => this.onData(chunk),
        fail: (error) => this.failAll(error),
        closed: (waiting) =>
          `Redis connection to ${node} closed with ${waiting} script call(s) waiting; ` +
          'whether they ran is unknown (the callers retry as for any failed call)',
      },
      { readBufferBytes: 64 * 1024 },
    ));
  }

  call(p: Pending): void {
    if (this.loaded.has(p.script)) this.send(p, p.script.evalshaHead);
    else {
      // First call of this script on this connection: EVAL with the body, which loads it for the
      // EVALSHAs written after it. An EVALSHA of a script the node does not hold would be answered
      // NOSCRIPT and sent again after the calls written meanwhile, reordering them.
      this.loaded.add(p.script);
      this.send(p, p.script.evalHead);
    }
  }

  /** Queues `p` as `head` (EVAL or EVALSHA with its script) followed by its keys and arguments. */
  private send(p: Pending, head: string): void {
    this.queue.push(p, `*${p.count + 3}\r\n${head}${p.tail}`);
  }

  private onData(input: Buffer): void {
    let chunk = input;
    if (this.carry) {
      chunk = Buffer.concat([this.carry, input]);
      this.carry = null;
    }
    let pos = 0;
    while (pos < chunk.length) {
      if (this.queue.count === 0) {
        this.protocolError(`a reply nobody waits for (byte ${chunk[pos]})`);
        return;
      }
      this.errorLine = null;
      const end = this.parse(chunk, pos);
      if (end === INCOMPLETE) {
        // Replies are small (a few numbers): keep the start and parse it again with the rest.
        this.carry = Buffer.from(chunk.subarray(pos));
        return;
      }
      if (end === PROTOCOL_ERROR) return;
      pos = end;
      const p = this.queue.next();
      const line = this.errorLine as string | null;
      if (line === null) p.resolve(this.value);
      else if (line.startsWith('NOSCRIPT')) {
        // Not run (the node's scripts were flushed): send it again with the body, which loads the
        // script for the calls after it. The calls written after this one and before the flush was
        // seen were refused too and are sent again in the same order.
        this.send(p, p.script.evalHead);
      } else if (line.startsWith('MOVED ') || line.startsWith('ASK ')) this.redirect(p);
      else p.reject(new RawScriptError(`Redis refused script ${p.script.name} on ${p.keys[0]}: ${line}`));
    }
  }

  /**
   * Parses one reply at `pos` into {@link value} / {@link errorLine}: the position after it,
   * {@link INCOMPLETE} or {@link PROTOCOL_ERROR}.
   */
  private parse(buf: Buffer, pos: number): number {
    const cr = buf.indexOf(0x0d, pos);
    if (cr < 0 || cr + 1 >= buf.length) return INCOMPLETE;
    const type = buf[pos];
    const after = cr + 2;
    switch (type) {
      case 0x3a /* : */:
        this.value = parseIntBytes(buf, pos + 1, cr);
        return after;
      case 0x24 /* $ */:
        {
          const length = parseIntBytes(buf, pos + 1, cr);
          if (length < 0) {
            this.value = null;
            return after;
          }
          if (after + length + 2 > buf.length) return INCOMPLETE;
          this.value = buf.toString('utf8', after, after + length);
          return after + length + 2;
        }
      case 0x2a /* * */:
        {
          const n = parseIntBytes(buf, pos + 1, cr);
          if (n < 0) {
            this.value = null;
            return after;
          }
          const items: RespValue[] = new Array(n);
          let at = after;
          for (let i = 0; i < n; i++) {
            at = this.parse(buf, at);
            if (at < 0) return at;
            // An error inside an array (a script returning redis.error_reply in a table) is a value.
            items[i] = this.errorLine === null ? this.value : this.errorLine;
            this.errorLine = null;
          }
          this.value = items;
          return at;
        }
      case 0x2b /* + */:
        this.value = buf.toString('utf8', pos + 1, cr);
        return after;
      case 0x2d /* - */:
        this.errorLine = buf.toString('utf8', pos + 1, cr);
        this.value = null;
        return after;
      default:
        this.protocolError(`an unexpected reply type '${String.fromCharCode(type as number)}'`);
        return PROTOCOL_ERROR;
    }
  }

  private protocolError(what: string): void {
    const error = new Error(`Raw script call to ${this.connection.node}: ${what}; the connection is dropped`);
    this.connection.broken = true;
    this.connection.socket.destroy();
    this.failAll(error);
  }

  private failAll(error: Error): void {
    this.connection.broken = true;
    this.queue.failAll((p) => p.reject(error));
  }

  close(): void {
    this.connection.broken = true;
    this.connection.socket.destroy();
  }
}

/** One caller per client for {@link RawScriptCaller.of}. */
const sharedCallers = new WeakMap<RedisClient, RawScriptCaller>();

/** `EVALSHA` over raw connections (see the module comment). */
export class RawScriptCaller {
  /**
   * The caller shared by everything that calls scripts through `client`: one socket per node, so
   * calls issued in order by any component reach Redis in that order.
   */
  static of(client: RedisClient): RawScriptCaller {
    let caller = sharedCallers.get(client);
    if (caller === undefined) {
      caller = new RawScriptCaller(client);
      sharedCallers.set(client, caller);
    }
    return caller;
  }

  private readonly nodes = new Map<string, NodeCaller>();
  private closed = false;
  private readonly viaClient = (p: Pending) => {
    this.client.eval(p.script.lua, p.script.numberOfKeys, ...p.keys, ...p.args).then(
      (v) => p.resolve(v as RespValue),
      (e: Error) => p.reject(e),
    );
  };

  constructor(private readonly client: RedisClient) {
    client.once('end', () => this.close());
  }

  /**
   * Runs `script` with `keys` (all in one hash slot) and `args`; resolves with its reply, rejects
   * with {@link RawScriptError} on an error reply (never throws synchronously).
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
      const p: Pending = { script, tail, count: keys.length + args.length, keys, args, resolve, reject };
      try {
        const client = this.client;
        if (this.closed || client.status !== 'ready') return this.viaClient(p);
        let node: string;
        if (client instanceof Cluster) {
          const owner = client.slots[slotOf(keys[0] as string)]?.[0];
          if (owner === undefined) return this.viaClient(p);
          node = owner;
        } else node = standaloneNode(client);
        let caller = this.nodes.get(node);
        if (caller === undefined || caller.connection.broken) {
          caller = new NodeCaller(client, node, this.viaClient);
          this.nodes.set(node, caller);
        }
        caller.call(p);
      } catch (error) {
        reject(error as Error);
      }
    });
  }

  /**
   * Drops the raw sockets; the next call opens new ones (whose first call of each script is an
   * `EVAL`), as after a node restart. For a caller that flushed the node's scripts on purpose (the
   * simulator's Redis restart, tests): on the open connections the calls would get `NOSCRIPT` and be
   * sent again when that reply is read, later than calls on other connections.
   */
  reconnect(): void {
    for (const caller of this.nodes.values()) caller.close();
    this.nodes.clear();
  }

  /** Closes the raw sockets (calls after this go through the client). */
  close(): void {
    this.closed = true;
    for (const caller of this.nodes.values()) caller.close();
    this.nodes.clear();
  }
}
