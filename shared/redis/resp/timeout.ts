/**
 * One timeout policy for every raw call (shared/redis/resp/): a connection fails the calls
 * waiting on it with {@link RawReadTimeoutError} when its node sends nothing for `timeoutMs` while
 * a reply is due ({@link SilenceWatchdog}). The limit comes from the caller's settings (the pacer's
 * `PACER_REDIS_SILENCE_MS`, a reader's or caller's `timeoutMs`), {@link DEFAULT_TIMEOUT_MS} without.
 */
import type net from 'node:net';
import { InvalidRawTimeoutError, RawReadTimeoutError } from './errors.js';

/** The silence limit of a raw connection when its user gives none, ms. */
export const DEFAULT_TIMEOUT_MS = 1000;

/** A `timeoutMs` option (default {@link DEFAULT_TIMEOUT_MS}), validated; `user` names it in the error. */
export function timeoutMsOption(user: string, value: number | undefined): number {
  const ms = value ?? DEFAULT_TIMEOUT_MS;
  if (!(ms > 0))
    throw new InvalidRawTimeoutError(`${user}: timeoutMs must be a positive number of ms (got ${value})`);
  return ms;
}

/** How often a watchdog looks: a few times per timeout, so it fires within 1.25 × timeoutMs. */
export function watchdogPeriodMs(timeoutMs: number): number {
  return Math.max(5, Math.floor(timeoutMs / 4));
}

/** The timeout error of a call: `what` happened, then what it means and what to do. */
export function timedOut(what: string): RawReadTimeoutError {
  return new RawReadTimeoutError(
    `${what}; the connection is dropped and the next call opens a new one. ` +
      'Check the node (paused, overloaded or unreachable), or raise timeoutMs.',
  );
}

/**
 * The raw layer's timeout policy, for every call (reads and scripts): progress, not duration. A node is taken for paused, hung or
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
