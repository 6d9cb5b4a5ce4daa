/**
 * Timing and I/O overlap of the single-region engine's simulated second: wall and CPU time per
 * phase (benchmarks), and the lease calls written to Redis while the request loop still runs.
 */
import { Redis } from 'ioredis';
import type { RedisClient } from '../../shared/redis/connect.js';
import type { ManualClock } from '../../shared/time/clock.js';

/**
 * Wall and CPU time per phase of the simulated second (`RunOptions.phases` of `sim/runner.ts`): what a
 * simulated day spends in the pacer, the readers' refresh, notices, requests and lease waits.
 * The notices issued during a pacer tick (see `tick`) count in `pacer`.
 */
export type PhaseTimes = Record<string, { wallMs: number; cpuMs: number }>;

/** Accumulates {@link PhaseTimes}: `begin`, then `end` with the phase's name. */
export class Phases {
  readonly times: PhaseTimes = {};
  private wall0 = 0;
  private cpu0 = 0;
  begin(): void {
    this.wall0 = performance.now();
    this.cpu0 = cpuMs();
  }
  end(name: string): void {
    let t = this.times[name];
    if (!t) {
      t = { wallMs: 0, cpuMs: 0 };
      this.times[name] = t;
    }
    t.wallMs += performance.now() - this.wall0;
    t.cpuMs += cpuMs() - this.cpu0;
  }
}

/**
 * Sends the guards' lease calls to Redis while the second's request loop is still running, so
 * redis-server works through them while this process runs the next auctions, without changing
 * what any command sees or returns. The lease and apply scripts go over the raw script connection
 * (shared/redis/resp/script-caller.ts), which writes what was issued at the end of each `process.nextTick`
 * turn — so the yield below is what sends them; commands on the client's own connection (a rebuild
 * after a reset) are collected and written here.
 *
 * A guard issues a lease call from `decide` (synchronously) but reaches the client only a
 * promise job later (its curve's `prepare`); without this, every call of the second is issued,
 * auto-pipelined and written after the loop, and the process waits for all the replies at once
 * (the `idle` phase). Every {@link OVERLAP_EVERY} requests {@link flush} lets those jobs run with
 * the clock at the second's start (as they ran after the loop before), the client's commands
 * collected into one string, then writes it: the same commands, in the same order, on the same
 * connection. No I/O callback runs during the loop (the yield is a `process.nextTick`, which
 * Node runs before returning to the event loop), so no reply is handled before the loop ends and
 * no guard's float changes within it: replies are read after the loop, in order, as before.
 *
 * Standalone clients only (the simulator's); a cluster client keeps auto-pipelining.
 */
export class LeaseOverlap {
  private readonly client: Redis | undefined;
  private active = false;
  private autoPipelining = false;
  /** Commands written since the last flush, as one RESP string. */
  private pending = '';

  constructor(redis: RedisClient, enabled: boolean) {
    this.client = enabled && redis instanceof Redis ? redis : undefined;
  }

  /**
   * Before the loop: the client writes each command directly (auto-pipelining off), and the
   * socket's `write` collects them into one string until {@link flush} (as ioredis's own pipeline
   * does): one write per flush, not one `writev` entry per command.
   */
  begin(): void {
    const c = this.client;
    if (c?.status !== 'ready') return;
    this.active = true;
    this.autoPipelining = c.options.enableAutoPipelining === true;
    c.options.enableAutoPipelining = false;
    const socket = c.stream;
    const write = socket.write;
    socket.write = ((chunk: string | Uint8Array, ...rest: never[]) => {
      if (typeof chunk === 'string' && rest.length === 0) {
        this.pending += chunk;
        return true;
      }
      this.writePending();
      return write.call(socket, chunk, ...rest);
    }) as typeof socket.write;
  }

  /** Runs the pending promise jobs with the clock at `secondStart`, writes their commands, puts the clock back. */
  async flush(clock: ManualClock, secondStart: number): Promise<void> {
    if (!this.active) return;
    const at = clock.now();
    clock.set(secondStart);
    await new Promise<void>((resolve) => process.nextTick(resolve));
    this.writePending();
    clock.set(at);
  }

  /** After the loop: everything written, the client as it was. */
  end(): void {
    if (!this.active) return;
    this.active = false;
    const c = this.client as Redis;
    this.writePending();
    // The socket's own write again (the prototype's).
    delete (c.stream as { write?: unknown }).write;
    c.options.enableAutoPipelining = this.autoPipelining;
  }

  private writePending(): void {
    if (this.pending === '') return;
    const socket = (this.client as Redis).stream;
    const data = this.pending;
    this.pending = '';
    Object.getPrototypeOf(socket).write.call(socket, data);
  }
}

/** Requests between two writes of the pending lease calls ({@link LeaseOverlap}). */
export const OVERLAP_EVERY = 16;

/** CPU time of this process so far (user + system), ms. */
export function cpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

/** CPU time of redis-server so far (INFO cpu), ms. */
export async function redisCpuMs(redis: RedisClient): Promise<number> {
  const info = await redis.info('cpu');
  const num = (k: string) => Number(new RegExp(`${k}:([0-9.]+)`).exec(info)?.[1] ?? 0);
  return (num('used_cpu_sys') + num('used_cpu_user')) * 1000;
}
