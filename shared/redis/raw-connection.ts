/**
 * Raw RESP connections for the bulk readers that skip ioredis's reply objects (the pacer's spend
 * read, shared/redis/raw-hgetall.ts; the cap check's log read, shared/redis/raw-get.ts). They
 * connect the way the application's client does: TLS when it uses TLS, and `AUTH` with the
 * username and password it currently holds — with ElastiCache IAM auth that password is the
 * signed token `connectRedis` keeps fresh, read at each connect, as ioredis reads it.
 */

import net from 'node:net';
import tls from 'node:tls';
import { Cluster } from 'ioredis';
import { PacelineError } from '../errors.js';
import type { RedisClient } from './connect.js';

/** Raised when a node refuses the `AUTH` of a raw connection; the message has the node's reply. */
export class RawRedisAuthError extends PacelineError {
  override readonly name = 'RawRedisAuthError';
  override readonly code = 'redis.auth';
}

/**
 * A raw read Redis did not answer in time (the readers' `timeoutMs`): a paused, hung or
 * overloaded node. The connection it waited on is dropped; the next read opens a new one.
 */
export class RawReadTimeoutError extends PacelineError {
  override readonly name = 'RawReadTimeoutError';
  override readonly code = 'redis.read-timeout';
}

/** The raw readers' `timeoutMs` option (default 1 s), validated. */
export function readTimeoutMs(reader: string, value: number | undefined): number {
  const ms = value ?? 1000;
  if (!(ms > 0)) throw new RangeError(`${reader}: timeoutMs must be a positive number of ms (got ${value})`);
  return ms;
}

/** How often a watchdog looks: a few times per timeout, so it fires within 1.25 × timeoutMs. */
export function watchdogPeriodMs(timeoutMs: number): number {
  return Math.max(5, Math.floor(timeoutMs / 4));
}

/** The timeout error of a read: `what` happened, then what it means and what to do. */
export function readTimedOut(what: string): RawReadTimeoutError {
  return new RawReadTimeoutError(
    `${what}; the connection is dropped and the next read opens a new one. ` +
      'Check the node (paused, overloaded or unreachable), or raise timeoutMs.',
  );
}

/**
 * The raw readers' timeout policy: progress, not duration. A node is taken for paused, hung or
 * unreachable when it has sent no bytes for `silenceMs` while a reply is outstanding — however
 * long the whole read takes (a pacer's read of 150,000 hashes streams for seconds on a busy
 * host, and a pipelined queue of reads answers its last one long after it was queued) — and the
 * silence is the node's, never this process's own:
 *
 * - the clock starts when a reply becomes outstanding on an idle connection (a new request on a
 *   connection with replies still due does not restart it) and restarts at every chunk received,
 *   and whenever more of this process's own commands have left for the node since the last look
 *   (a bulk read writes megabytes of commands, which leave only as the event loop turns: a process
 *   busy stepping the first replies has not sent the rest, and the node, done with what it got,
 *   is silent for want of commands, not hung);
 * - time this process did not run counts for nothing: a look that comes late (its own CPU work, a
 *   GC pause, a descheduled container held the event loop) moves the clock's start by the delay,
 *   and a look that finds the limit passed looks once more after the event loop's next I/O poll
 *   (`setImmediate`): a busy process runs its timers before it reads the bytes already waiting in
 *   its sockets, and its queued commands leave only over the next turns.
 *
 * One interval timer per watchdog (unreferenced), a few looks per limit; the request path only
 * stamps times.
 */
export class SilenceWatchdog {
  private since = 0;
  private outstanding = false;
  private confirming = false;
  private sent = 0;
  private lastLook = performance.now();
  private readonly period: number;
  private readonly timer: NodeJS.Timeout;

  /**
   * @param silenceMs the longest silence while a reply is outstanding
   * @param expired called once the limit is passed (with the silence measured, ms); the watchdog
   *   stops: its owner drops the connection
   * @param socket the connection's socket, whose written bytes count as progress too
   */
  constructor(
    readonly silenceMs: number,
    private readonly expired: (silentMs: number) => void,
    private readonly socket?: net.Socket,
  ) {
    this.period = watchdogPeriodMs(silenceMs);
    this.timer = setInterval(() => this.look(), this.period);
    this.timer.unref();
  }

  /** A reply is outstanding: starts the clock unless replies were already due. */
  expect(): void {
    if (this.outstanding) return;
    this.outstanding = true;
    this.since = performance.now();
  }

  /** Bytes arrived from the node: progress. */
  heard(): void {
    this.since = performance.now();
  }

  /** No reply is outstanding any more (silence is then no fault). */
  idle(): void {
    this.outstanding = false;
  }

  /** Stops looking (the connection is closed or replaced). */
  close(): void {
    this.outstanding = false;
    clearInterval(this.timer);
  }

  /** Bytes of this process's commands the socket has sent (handed over whole, not queued). */
  private sentBytes(): number {
    const s = this.socket;
    return s === undefined ? 0 : s.bytesWritten - s.writableLength;
  }

  private look(): void {
    const now = performance.now();
    const late = now - this.lastLook - this.period;
    this.lastLook = now;
    if (!this.outstanding || this.confirming) return;
    // This process was not running (a stall longer than a look's period): not the node's silence.
    if (late > this.period) this.since = Math.min(now, this.since + late);
    const sent = this.sentBytes();
    if (sent !== this.sent) {
      this.sent = sent;
      this.since = performance.now();
      return;
    }
    if (performance.now() - this.since <= this.silenceMs) return;
    this.confirming = true;
    setImmediate(() => {
      this.confirming = false;
      if (!this.outstanding) return;
      const sentSince = this.sentBytes();
      if (sentSince !== this.sent) {
        this.sent = sentSince;
        this.since = performance.now();
        return;
      }
      const silent = performance.now() - this.since;
      if (silent <= this.silenceMs) return;
      this.close();
      this.expired(silent);
    });
  }
}

/** One raw connection to one node. `ready` resolves once it is connected and authenticated. */
export interface RawConnection {
  readonly node: string;
  readonly socket: net.Socket;
  readonly ready: Promise<void>;
  /** Set on error or close: the next read opens a new connection. */
  broken: boolean;
  /**
   * Where received bytes go (set by the reader once `ready`; `null` drops them). The buffer is
   * valid only during the call when the connection reuses one read buffer
   * ({@link RawConnectionOptions.readBufferBytes}): copy what must outlive it.
   */
  receive: ((bytes: Buffer) => void) | null;
}

/** Options of {@link openRawConnection}. */
export interface RawConnectionOptions {
  /**
   * Size of one buffer every socket read lands in, reused from read to read (Node's `onread`),
   * for plain TCP; 0 keeps Node's default of a fresh 64 KiB buffer per read. The bulk readers
   * want the reused one: the fresh buffers (and the garbage collections they drive) and the
   * smaller reads cost about twice the CPU per tens-of-KB reply (docs/counting.md, "Reads"), and
   * a tick's spend read is ~100 MB of replies. TLS connections always use Node's buffers.
   * @default 262144 (256 KiB: several 60 KB logs per read)
   */
  readonly readBufferBytes?: number;
}

/** How the application's client connects: TLS, and the credentials it holds right now. */
function connectionSettings(client: RedisClient): { tls: boolean; username?: string; password?: string } {
  const opts = client instanceof Cluster ? client.options.redisOptions : client.options;
  return {
    tls: opts?.tls !== undefined,
    ...(opts?.username ? { username: opts.username } : {}),
    ...(opts?.password ? { password: opts.password } : {}),
  };
}

/** A RESP bulk string for a command argument. */
export function bulk(value: string): string {
  return `$${Buffer.byteLength(value)}\r\n${value}\r\n`;
}

/**
 * Opens a raw connection to `node` (`host:port`). With a password configured it sends `AUTH`
 * first and resolves `ready` only on `+OK`; a refusal rejects with {@link RawRedisAuthError}.
 * Received bytes go to `connection.receive`, which the caller sets after `ready`; they are valid
 * only during that call (the read buffer is reused): a reader copies what it keeps.
 */
export function openRawConnection(
  client: RedisClient,
  node: string,
  options: RawConnectionOptions = {},
): RawConnection {
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
              connection.receive?.((buffer as Buffer).subarray(0, bytes));
              return true; // keep reading
            },
          },
        })
      : net.connect({ host, port });
  if (!reuse) socket.on('data', (chunk: Buffer) => connection.receive?.(chunk));
  socket.setNoDelay(true);
  const connected = new Promise<void>((resolve, reject) => {
    socket.once(settings.tls ? 'secureConnect' : 'connect', () => resolve());
    socket.once('error', reject);
  });
  const ready = connected.then(() => {
    const { username, password } = settings;
    if (password === undefined) return;
    return new Promise<void>((resolve, reject) => {
      let reply = '';
      const onData = (chunk: Buffer) => {
        reply += chunk.toString('latin1');
        const end = reply.indexOf('\r\n');
        if (end < 0) return;
        connection.receive = null;
        socket.off('close', onClose);
        const line = reply.slice(0, end);
        if (line === '+OK') resolve();
        else {
          socket.destroy();
          reject(
            new RawRedisAuthError(
              `Redis node ${node} refused AUTH${username ? ` for ${username}` : ''}: ${line}`,
            ),
          );
        }
      };
      const onClose = () => reject(new Error(`Redis node ${node} closed the connection during AUTH`));
      connection.receive = onData;
      socket.once('close', onClose);
      const args = username ? ['AUTH', username, password] : ['AUTH', password];
      socket.write(`*${args.length}\r\n${args.map(bulk).join('')}`);
    });
  });
  const connection: RawConnection = { node, socket, ready, broken: false, receive: null };
  socket.on('error', () => {
    connection.broken = true;
  });
  socket.on('close', () => {
    connection.broken = true;
  });
  ready.catch(() => {
    connection.broken = true;
    socket.destroy();
  });
  return connection;
}

/** `host:port` of a standalone client (the node every key lives on). */
export function standaloneNode(client: RedisClient): string {
  const opts = client instanceof Cluster ? undefined : client.options;
  return `${opts?.host ?? '127.0.0.1'}:${opts?.port ?? 6379}`;
}

/**
 * The requests of one raw connection waiting for their replies, in the order their commands were
 * written (Redis answers in that order), and the commands not written yet: everything queued in
 * one event-loop turn goes out in one write, once the connection is {@link start}ed. The socket is
 * referenced only while requests wait, so an idle connection never keeps a process alive.
 */
export class RequestQueue<P> {
  private readonly waiting: P[] = [];
  private head = 0;
  private outgoing: string[] = [];
  private flushScheduled = false;
  private started = false;

  constructor(private readonly connection: RawConnection) {}

  /** Requests waiting for a reply. */
  get count(): number {
    return this.waiting.length - this.head;
  }

  /** The request the next reply answers (undefined when none waits). */
  oldest(): P | undefined {
    return this.count > 0 ? this.waiting[this.head] : undefined;
  }

  /** Queues `request`, whose command is written at the end of this turn (or at {@link start}). */
  push(request: P, command: string): void {
    if (this.count === 0) this.connection.socket.ref();
    this.waiting.push(request);
    this.outgoing.push(command);
    if (!this.flushScheduled && this.started) {
      this.flushScheduled = true;
      process.nextTick(() => this.flush());
    }
  }

  /** The connection is ready: writes what was queued before, and from now on once per turn. */
  start(): void {
    this.started = true;
    this.flush();
  }

  /** Takes the request the next reply answers. */
  next(): P {
    const p = this.waiting[this.head] as P;
    this.waiting[this.head++] = undefined as unknown as P;
    if (this.head === this.waiting.length) {
      this.waiting.length = 0;
      this.head = 0;
      this.connection.socket.unref();
    } else if (this.head > 1024 && this.head * 2 > this.waiting.length) {
      this.waiting.splice(0, this.head);
      this.head = 0;
    }
    return p;
  }

  /** Drops the unwritten commands and hands every waiting request to `fail` (connection gone). */
  failAll(fail: (request: P) => void): void {
    this.outgoing = [];
    while (this.count > 0) fail(this.next());
  }

  private flush(): void {
    this.flushScheduled = false;
    if (this.outgoing.length === 0 || this.connection.broken) return;
    const data = this.outgoing.length === 1 ? (this.outgoing[0] as string) : this.outgoing.join('');
    this.outgoing = [];
    this.connection.socket.write(data);
  }
}

/** What a request/reply user of a raw connection handles ({@link openRequestConnection}). */
export interface RequestConnectionHandlers {
  /** Bytes received (valid only during the call). */
  onData(chunk: Buffer): void;
  /** The connection failed (AUTH refused, socket error) or closed: fail what waits. */
  fail(error: Error): void;
  /** The error message for a close, given how many requests wait. */
  closed(waiting: number): string;
}

/**
 * Opens a raw connection with its {@link RequestQueue}: the socket unreferenced until requests
 * wait; once ready, replies go to `onData` and what was queued before is written; an AUTH refusal,
 * an error or a close goes to `fail`.
 */
export function openRequestConnection<P>(
  client: RedisClient,
  node: string,
  handlers: RequestConnectionHandlers,
  options: RawConnectionOptions = {},
): { connection: RawConnection; queue: RequestQueue<P> } {
  const connection = openRawConnection(client, node, options);
  const queue = new RequestQueue<P>(connection);
  const socket = connection.socket;
  socket.unref();
  connection.ready.then(
    () => {
      connection.receive = (chunk) => handlers.onData(chunk);
      queue.start();
    },
    (error: Error) => handlers.fail(error),
  );
  socket.on('close', () => handlers.fail(new Error(handlers.closed(queue.count))));
  socket.on('error', (error) => handlers.fail(error));
  return { connection, queue };
}
