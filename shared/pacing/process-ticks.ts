/**
 * The ticks of one pacer shard in one process. A process keeps its warm state (budgets cache,
 * controller state, what it published) per shard, and every invocation it runs for that shard —
 * whichever instance — shares it; running one tick twice on that state would step the controller
 * twice for one tick (and a leader continuing its own publishes would publish the doubled state).
 * So in one process a shard's ticks run one at a time, and each at most once.
 *
 * - Lambda runs one invocation per execution environment at a time: there two invocations of a
 *   process meet only in sequence — the next one starting inside the tick the previous one ran
 *   last. That tick is not run again.
 * - Where invocations of a shard run concurrently in one process (the in-process invoker), a tick
 *   goes to the invocation with the highest held lease epoch among those whose window still
 *   includes it: an older invocation never runs a tick whose lease a newer one of the same process
 *   holds (it would lose the lease in that tick and publish nothing), and a newer one that does not
 *   hold the lease leaves the ticks to the holder until the holder's window ends.
 */

/** Why a tick did not run in this invocation: this process ran it already, or runs it in another invocation. */
export type TickTurn<T> = { readonly ran: true; readonly value: T } | { readonly ran: false };

/** One invocation's access to its shard's ticks in this process ({@link ProcessTicks.join}). */
export interface TickTurns {
  /**
   * Runs `fn` as tick `tick` unless this process already started that tick, or another
   * invocation here with a higher rank will run it; one tick at a time per shard. Rejects with
   * `fn`'s error.
   */
  run<T>(tick: number, fn: () => Promise<T>): Promise<TickTurn<T>>;
  /** The invocation is over (its window ended). */
  leave(): void;
}

interface Member {
  readonly lastTick: number;
  readonly rank: () => number;
}

/** A shard's ticks in one process; one instance per shard, kept with the shard's warm state. */
export class ProcessTicks {
  private lastStarted = Number.NEGATIVE_INFINITY;
  private queue: Promise<unknown> = Promise.resolve();
  private readonly members = new Set<Member>();

  /** The last tick this process started for the shard (−∞ before the first). */
  get last(): number {
    return this.lastStarted;
  }

  /**
   * Joins an invocation whose window ends with `lastTick`. `rank` is its lease epoch while it
   * holds the lease (0 otherwise): among invocations that want the same tick, the highest runs it.
   */
  join(lastTick: number, rank: () => number): TickTurns {
    const member: Member = { lastTick, rank };
    this.members.add(member);
    return {
      run: <T>(tick: number, fn: () => Promise<T>) => {
        const turn = this.queue.then(async (): Promise<TickTurn<T>> => {
          if (tick <= this.lastStarted) return { ran: false };
          const mine = member.rank();
          for (const other of this.members) {
            if (other !== member && other.lastTick >= tick && other.rank() > mine) return { ran: false };
          }
          this.lastStarted = tick;
          return { ran: true, value: await fn() };
        });
        this.queue = turn.catch(() => undefined);
        return turn;
      },
      leave: () => {
        this.members.delete(member);
      },
    };
  }
}
