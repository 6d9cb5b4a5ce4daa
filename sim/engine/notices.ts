/**
 * The notices phase of the single-region engine: win and loss notices wait for their delivery
 * batch ({@link NoticeQueue}), then go through the real `SpendTracker` into the live counters,
 * their scripts written while this process runs on ({@link LeaseOverlap}); the spend they add is
 * booked for the scorer once their replies land.
 */
import type { SpendTracker, TrackOutcome } from '../../shared/spend/tracker.js';
import type { ManualClock } from '../../shared/time/clock.js';
import { NoticeQueue } from '../engine-parts.js';
import type { Scenario } from '../scenario.js';
import type { NoticeEvent } from './bidding.js';
import { type LeaseOverlap, OVERLAP_EVERY } from './overlap.js';

/** Notices are delivered in batches of this many ms (a track-spend invocation takes a batch). */
export const NOTICE_BATCH_MS = 5_000;

/** What {@link NoticeFlow} needs. */
export interface NoticeFlowOptions {
  readonly scenario: Scenario;
  readonly clock: ManualClock;
  readonly tracker: SpendTracker;
  readonly overlap: LeaseOverlap;
  /** Whether notices' scripts are issued without waiting (see `RunOptions.overlap`). */
  readonly overlapOn: boolean;
  /** Books spend the tracker added for a notice's bid. */
  readonly book: (event: NoticeEvent, addedMicros: number) => void;
  readonly onError: (line: string) => void;
}

/** The run's notices (module comment). */
export class NoticeFlow {
  /** Notices applied (duplicates included). */
  applied = 0;
  private readonly queue: NoticeQueue<NoticeEvent>;
  /** The second's notices while their scripts run (awaited after the request loop). */
  private applying: { due: NoticeEvent[]; outcomes: Promise<(TrackOutcome | undefined)[]> } | undefined;

  constructor(private readonly o: NoticeFlowOptions) {
    this.queue = new NoticeQueue<NoticeEvent>(
      NOTICE_BATCH_MS,
      o.scenario.faults.flatMap((f) => (f.kind === 'notices-stalled' ? [f] : [])),
    );
  }

  /** Queues a notice sent at `at`. */
  add(at: number, event: NoticeEvent): void {
    this.queue.add(at, event);
  }

  /** Removes and returns the batch delivered at `nowMs` (undefined: none). */
  take(nowMs: number): NoticeEvent[] | undefined {
    return this.queue.take(nowMs);
  }

  /** Issues the second's notices; their replies land with the leases' ({@link landed}). */
  async issue(due: NoticeEvent[], now: number): Promise<void> {
    const { overlap, clock, tracker } = this.o;
    overlap.begin();
    const started: Promise<TrackOutcome | undefined>[] = [];
    for (let i = 0; i < due.length; i++) {
      if (i > 0 && i % (OVERLAP_EVERY * 4) === 0) await overlap.flush(clock, now);
      started.push(
        tracker.apply(due[i] as NoticeEvent).catch((e: unknown) => {
          this.o.onError(`tracker: ${String(e)}`);
          return undefined;
        }),
      );
    }
    overlap.end();
    this.applying = { due, outcomes: Promise.all(started) };
    if (this.o.overlapOn) {
      // Every notice's script issued now, before any lease call of the loop: the promise jobs of
      // each apply run to its script call without waiting for a reply, and a process.nextTick
      // callback runs only once every such job has run.
      await new Promise<void>((resolve) => process.nextTick(resolve));
    }
  }

  /** Waits for the issued notices and books their spend for the scorer. */
  async landed(): Promise<void> {
    if (!this.applying) return;
    const { due, outcomes: landing } = this.applying;
    this.applying = undefined;
    const outcomes = await landing;
    this.applied += outcomes.length;
    for (let i = 0; i < outcomes.length; i++) {
      const o = outcomes[i];
      if (!o || o.addedMicros <= 0) continue;
      this.o.book(due[i] as NoticeEvent, o.addedMicros);
    }
  }
}
