/**
 * The outbox sweeper (the domain of the scheduled sweep-spend function): applies every win whose
 * intent is still in the outbox — track-spend wrote the ledger but could not confirm the Redis
 * apply (Redis refusing writes beyond the event source's retries, a crash loop, a record sent to
 * the on-failure destination). Each intent is settled through the tracker (ledger write and apply,
 * both idempotent), then closed. Only this region's intents are listed (and the version 1 ones
 * of the shared partition): the outbox lives in the ledger's global table, and another region's
 * intent is a win for that region's live counters. The guarantee is stated in docs/spend.md.
 */
import { MalformedRecordError } from '../quarantine/quarantine.js';
import type { Clock } from '../time/clock.js';
import type { PendingWin, SpendOutbox } from './outbox.js';
import type { SpendTracker } from './tracker.js';

/** Options of {@link OutboxSweeper}. */
export interface OutboxSweeperOptions {
  readonly outbox: Pick<SpendOutbox, 'pending' | 'closeFound'>;
  readonly tracker: Pick<SpendTracker, 'settlePending'>;
  readonly clock: Clock;
  /**
   * Intents younger than this are left alone: track-spend is most likely applying them right
   * now (taking them would be correct, only wasted work). @default 10_000
   */
  readonly graceMs?: number;
  /** Intents settled concurrently. @default 16 */
  readonly concurrency?: number;
  /**
   * Stop taking new intents when this returns true (e.g. the Lambda deadline is near); the rest
   * wait for the next run. @default never
   */
  readonly shouldStop?: () => boolean;
  /** Give up the run after this many failures in a row (Redis still refusing). @default 32 */
  readonly maxConsecutiveFailures?: number;
}

/** Outcome of one sweep. */
export interface SweepResult {
  /** Intents found older than the grace. */
  readonly found: number;
  /** Intents applied and closed. */
  readonly settled: number;
  /** Intents whose settle failed (kept for the next run), with the last error. */
  readonly failed: number;
  readonly lastError?: string;
  /** Age of the oldest intent still pending after the run (0 when none), ms. */
  readonly oldestPendingAgeMs: number;
  /** The run stopped early (deadline, or too many failures in a row). */
  readonly stoppedEarly: boolean;
}

/** Applies the outbox's pending wins. */
export class OutboxSweeper {
  private readonly graceMs: number;
  private readonly concurrency: number;
  private readonly maxFailures: number;

  constructor(private readonly options: OutboxSweeperOptions) {
    this.graceMs = options.graceMs ?? 10_000;
    this.concurrency = options.concurrency ?? 16;
    this.maxFailures = options.maxConsecutiveFailures ?? 32;
  }

  /** One pass over the outbox. */
  async sweep(): Promise<SweepResult> {
    const { outbox, tracker, clock } = this.options;
    const now = clock.now();
    let found = 0;
    let settled = 0;
    let failed = 0;
    let inARow = 0;
    let lastError: string | undefined;
    let oldestPending = Number.POSITIVE_INFINITY;
    let stoppedEarly = false;
    const running = new Set<Promise<void>>();
    const settle = async (p: PendingWin) => {
      try {
        await tracker.settlePending(p.entry);
        // settlePending closes this region's intent; one found in the shared version 1 partition
        // is closed where it was found.
        if (p.version === 1) await outbox.closeFound(p);
        settled++;
        inARow = 0;
      } catch (error) {
        failed++;
        inARow++;
        lastError = `${(error as Error).name}: ${(error as Error).message}`;
        if (p.since < oldestPending) oldestPending = p.since;
        // A win whose campaign vanished, or any other content problem, stays for a human; the
        // age alarm shows it. Everything else (Redis, DynamoDB) is retried by the next run.
        if (!(error instanceof MalformedRecordError) && inARow >= this.maxFailures) stoppedEarly = true;
      }
    };
    for await (const p of outbox.pending(now - this.graceMs)) {
      if (stoppedEarly || this.options.shouldStop?.()) {
        stoppedEarly = true;
        if (p.since < oldestPending) oldestPending = p.since;
        continue;
      }
      found++;
      const task = settle(p).finally(() => running.delete(task));
      running.add(task);
      if (running.size >= this.concurrency) await Promise.race(running);
    }
    await Promise.all(running);
    return {
      found,
      settled,
      failed,
      ...(lastError === undefined ? {} : { lastError }),
      oldestPendingAgeMs: Number.isFinite(oldestPending) ? Math.max(0, clock.now() - oldestPending) : 0,
      stoppedEarly,
    };
  }
}
