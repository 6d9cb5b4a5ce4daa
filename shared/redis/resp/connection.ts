/**
 * One raw RESP connection to one Redis node and its request queue, for every raw call of the
 * layer (shared/redis/resp/: GET, bulk HGETALL/HMGET, script calls).
 *
 * - It connects the way the application's client does: TLS when it uses TLS, and `AUTH` with the
 *   username and password it holds at that moment (with ElastiCache IAM auth the signed token
 *   `connectRedis` keeps fresh), read through shared/redis/resp/ioredis-adapter.ts.
 * - Requests are answered in the order their commands were written; everything queued in one
 *   event-loop turn goes out in one write. A request may take many replies (a bulk read's keys).
 * - Replies go through the one parser (shared/redis/resp/parser.ts) to the oldest request.
 * - One timeout policy (shared/redis/resp/timeout.ts): a node silent for `timeoutMs` while
 *   replies are due fails every waiting request with a `RawReadTimeoutError`. A socket error, a
 *   close or bytes that are not RESP fail them too (`RawConnectionError`, `RawProtocolError`);
 *   the connection is then `broken` and its owner opens a new one for the next call.
 * - The socket is referenced only while requests wait, so an idle connection never keeps a
 *   process alive.
 */
import net from 'node:net';
import tls from 'node:tls';
import type { RedisClient } from '../connect.js';
import { RawConnectionError, RawProtocolError, RawRedisAuthError, type RawRedisError } from './errors.js';
import { connectionSettings } from './ioredis-adapter.js';
import { ERROR, RespParser } from './parser.js';
import { SilenceWatchdog, timedOut } from './timeout.js';

/** A RESP bulk string for a command argument. */
export function bulk(value: string): string {
  return `$${Buffer.byteLength(value)}\r\n${value}\r\n`;
}

/** What waits on a connection for one or more replies. */
export interface RespRequest {
  /**
   * A reply for this request (tokens as the parser frames them, valid only during the call); an
   * error reply too (`tokens[0]` is `ERROR`). Returns true when the request takes no more replies.
   */
  reply(buf: Buffer, tokens: Int32Array, count: number): boolean;
  /** The connection failed before every reply came: fail what is left. */
  fail(error: RawRedisError): void;
  /** What waits, for a timeout's message (`while GET k waited`, `during a read of …`). */
  waiting(): string;
}

/** Options of {@link RespConnection}. */
export interface RespConnectionOptions {
  /** Silence limit while replies are due, ms (shared/redis/resp/timeout.ts). */
  readonly timeoutMs: number;
  /**
   * Size of one buffer every socket read lands in, reused from read to read (Node's `onread`),
   * for plain TCP; 0 keeps Node's fresh 64 KiB buffer per read. The bulk readers want the reused
   * one: fresh buffers (and the collections they drive) and smaller reads cost about twice the CPU
   * per tens-of-KB reply (docs/counting.md, "Reads"). TLS connections always use Node's buffers.
   * @default 262144
   */
  readonly readBufferBytes?: number;
  /** Largest split reply gathered in the parser's reused buffer. @default 4 MiB */
  readonly maxReusedBytes?: number;
}

/** Largest batch of queued commands given to the socket in one write. */
const WRITE_BATCH_CHARS = 256 * 1024;

/** One raw connection to one node (see the module comment). */
export class RespConnection {
  readonly socket: net.Socket;
  /** Connected and authenticated (rejects with `RawRedisAuthError` on a refused AUTH). */
  readonly ready: Promise<void>;
  /** Set on error, close, timeout or protocol error: the owner opens a new connection. */
  broken = false;
  /** Scripts this connection has sent with their body (the node holds them unless flushed). */
  readonly scripts = new Set<object>();
  private readonly waitingRequests: RespRequest[] = [];
  private head = 0;
  private outgoing: string[] = [];
  private flushScheduled = false;
  private started = false;
  private receive: ((bytes: Buffer) => void) | null = null;
  private readonly parser: RespParser;
  private readonly watchdog: SilenceWatchdog;

  constructor(
    client: RedisClient,
    readonly node: string,
    private readonly options: RespConnectionOptions,
  ) {
    const idx = node.lastIndexOf(':');
    const host = node.slice(0, idx);
    const port = Number(node.slice(idx + 1));
    const settings = connectionSettings(client);
    const readBufferBytes = options.readBufferBytes ?? 256 * 1024;
    const reuse = !settings.tls && readBufferBytes > 0;
    const socket = settings.tls
      ? tls.connect({ host, port, servername: net.isIP(host) ? undefined : host })
      : reuse
        ? net.connect({
            host,
            port,
            onread: {
              buffer: Buffer.allocUnsafe(readBufferBytes),
              callback: (bytes: number, buffer: Uint8Array) => {
                this.receive?.((buffer as Buffer).subarray(0, bytes));
                return true; // keep reading
              },
            },
          })
        : net.connect({ host, port });
    if (!reuse) socket.on('data', (chunk: Buffer) => this.receive?.(chunk));
    socket.setNoDelay(true);
    socket.unref();
    this.socket = socket;
    this.parser = new RespParser({
      reply: (buf, tokens, count) => this.onReply(buf, tokens, count),
      invalid: (what) =>
        this.drop(new RawProtocolError(`Raw call to ${node}: ${what}; the connection is dropped`)),
      ...(options.maxReusedBytes === undefined ? {} : { maxReusedBytes: options.maxReusedBytes }),
    });
    // A timer per connection rather than per call: the call path only stamps times.
    this.watchdog = new SilenceWatchdog(options.timeoutMs, () => this.timedOut(), socket);
    const connected = new Promise<void>((resolve, reject) => {
      socket.once(settings.tls ? 'secureConnect' : 'connect', () => resolve());
      socket.once('error', reject);
    });
    this.ready = connected.then(() => this.authenticate(settings.username, settings.password));
    this.ready.then(
      () => {
        this.receive = (chunk) => this.onData(chunk);
        this.started = true;
        this.flush();
      },
      (error: Error) =>
        this.drop(
          error instanceof RawRedisAuthError
            ? error
            : new RawConnectionError(`Redis node ${node} could not be reached: ${error.message}`),
        ),
    );
    socket.on('error', (error) =>
      this.drop(new RawConnectionError(`Redis connection to ${node} failed: ${error.message}`)),
    );
    socket.on('close', () =>
      this.drop(
        new RawConnectionError(
          `Redis connection to ${node} closed with ${this.count} call(s) waiting; whether a waiting ` +
            'script ran is unknown (retry as for any failed call); the next call opens a new connection',
        ),
      ),
    );
  }

  /** Requests waiting for replies. */
  get count(): number {
    return this.waitingRequests.length - this.head;
  }

  /**
   * Queues `request`, its command (RESP text) written at the end of this turn; `more` are further
   * commands of the same request (a bulk read's keys), written after it.
   */
  push(request: RespRequest, command: string, more?: readonly string[]): void {
    if (this.count === 0) this.socket.ref();
    this.watchdog.expect();
    this.waitingRequests.push(request);
    this.outgoing.push(command);
    if (more) for (const c of more) this.outgoing.push(c);
    if (!this.flushScheduled && this.started) {
      this.flushScheduled = true;
      process.nextTick(() => this.flush());
    }
  }

  /** Closes the connection; what waits fails. */
  close(): void {
    this.drop(new RawConnectionError(`Raw connection to ${this.node} closed by its owner`));
  }

  private async authenticate(username: string | undefined, password: string | undefined): Promise<void> {
    if (password === undefined) return;
    return new Promise<void>((resolve, reject) => {
      let reply = '';
      const onClose = () => reject(new Error(`Redis node ${this.node} closed the connection during AUTH`));
      this.receive = (chunk: Buffer) => {
        reply += chunk.toString('latin1');
        const end = reply.indexOf('\r\n');
        if (end < 0) return;
        this.receive = null;
        this.socket.off('close', onClose);
        const line = reply.slice(0, end);
        if (line === '+OK') return resolve();
        reject(
          new RawRedisAuthError(
            `Redis node ${this.node} refused AUTH${username ? ` for ${username}` : ''}: ${line}. ` +
              "Check the client's credentials (with IAM auth, the token's user and the cache's user group).",
          ),
        );
      };
      this.socket.once('close', onClose);
      const args = username ? ['AUTH', username, password] : ['AUTH', password];
      this.socket.write(`*${args.length}\r\n${args.map(bulk).join('')}`);
    });
  }

  private onData(chunk: Buffer): void {
    this.watchdog.heard();
    this.parser.feed(chunk);
    if (this.count === 0) this.watchdog.idle();
  }

  private onReply(buf: Buffer, tokens: Int32Array, count: number): void {
    if (this.count === 0) {
      const kind =
        tokens[0] === ERROR ? `error ${buf.toString('latin1', tokens[1], tokens[2])}` : `type ${tokens[0]}`;
      this.drop(
        new RawProtocolError(
          `Raw call to ${this.node}: a reply nobody waits for (${kind}); the connection is dropped`,
        ),
      );
      return;
    }
    const request = this.waitingRequests[this.head] as RespRequest;
    if (request.reply(buf, tokens, count)) this.next();
  }

  /** Removes the oldest request (answered in full). */
  private next(): void {
    this.waitingRequests[this.head++] = undefined as unknown as RespRequest;
    if (this.head === this.waitingRequests.length) {
      this.waitingRequests.length = 0;
      this.head = 0;
      this.socket.unref();
    } else if (this.head > 1024 && this.head * 2 > this.waitingRequests.length) {
      this.waitingRequests.splice(0, this.head);
      this.head = 0;
    }
  }

  private timedOut(): void {
    const oldest = this.waitingRequests[this.head];
    this.drop(
      timedOut(
        `Redis at ${this.node} sent nothing for ${this.options.timeoutMs} ms ${oldest?.waiting() ?? 'while a reply was due'} ` +
          `(${this.count} call(s) waiting)`,
      ),
    );
  }

  /** Breaks the connection and fails every waiting request with `error` (once). */
  private drop(error: RawRedisError): void {
    if (!this.broken) {
      this.broken = true;
      this.parser.stop();
      this.watchdog.close();
      this.receive = null;
      this.socket.destroy();
    }
    this.outgoing = [];
    while (this.count > 0) {
      const request = this.waitingRequests[this.head] as RespRequest;
      this.next();
      request.fail(error);
    }
  }

  private flush(): void {
    this.flushScheduled = false;
    if (this.outgoing.length === 0 || this.broken) return;
    const out = this.outgoing;
    this.outgoing = [];
    if (out.length === 1) {
      this.socket.write(out[0] as string);
      return;
    }
    let batch = '';
    for (const command of out) {
      batch += command;
      if (batch.length >= WRITE_BATCH_CHARS) {
        this.socket.write(batch);
        batch = '';
      }
    }
    if (batch.length > 0) this.socket.write(batch);
  }
}
