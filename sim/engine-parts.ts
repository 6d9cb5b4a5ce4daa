/**
 * Pieces both simulation engines share — the scenario runner (`runner.ts`) and the controller
 * soak tests' driver (`pacing-sim.ts`): the in-memory ledger, the advertiser-day cache and the
 * batched notice queue.
 */
import { type DayWindow, dayWindow } from '../shared/budget/time-zone.js';
import type { LedgerEntry, LedgerStore } from '../shared/spend/ledger.js';

/**
 * The ledger's contract in memory (first write of a bid wins, entries per campaign-day, start
 * markers). The DynamoDB ledger's own behaviour is tested on dynalite in test/integration/spend/;
 * dynalite would not take a simulated day's writes in test time.
 */
export function memoryLedger(): LedgerStore {
  const entries = new Map<string, Map<string, LedgerEntry>>();
  const markers = new Set<string>();
  return {
    async record(entry) {
      const key = `${entry.campaignId}#${entry.day}`;
      let day = entries.get(key);
      if (!day) {
        day = new Map();
        entries.set(key, day);
      }
      const stored = day.get(entry.bidId);
      if (stored) return { created: false, entry: stored };
      day.set(entry.bidId, entry);
      return { created: true, entry };
    },
    async entries(campaignId, day, armId) {
      const all = [...(entries.get(`${campaignId}#${day}`)?.values() ?? [])];
      return armId === undefined ? all : all.filter((e) => e.armId === armId);
    },
    async markPlanDayStarted(scope, planId, day) {
      const key = `${scope}#${planId}#${day}`;
      if (markers.has(key)) return false;
      markers.add(key);
      return true;
    },
  };
}

/**
 * The advertiser day of an instant in a zone, remembering the last day per zone: a simulation
 * asks for the same few days millions of times, and `dayWindow` computes zone offsets.
 */
export function dayWindows(): (timeZone: string, nowMs: number) => DayWindow {
  const windows = new Map<string, DayWindow>();
  return (timeZone, nowMs) => {
    const w = windows.get(timeZone);
    if (w && nowMs >= w.startMs && nowMs < w.endMs) return w;
    const n = dayWindow(nowMs, timeZone);
    windows.set(timeZone, n);
    return n;
  };
}

/**
 * Notices waiting for their delivery batch: a notice due at `at` is delivered at the next multiple
 * of `batchMs` (a track-spend invocation takes a batch from the stream too), or at the end of a
 * stall that batch falls into.
 */
export class NoticeQueue<N> {
  private readonly due = new Map<number, N[]>();

  constructor(
    private readonly batchMs: number,
    private readonly stalls: readonly { readonly atMs: number; readonly untilMs: number }[] = [],
  ) {}

  /** Queues a notice sent at `at`. */
  add(at: number, notice: N): void {
    let batch = Math.ceil(at / this.batchMs) * this.batchMs;
    for (const s of this.stalls)
      if (batch >= s.atMs && batch < s.untilMs) batch = Math.ceil(s.untilMs / this.batchMs) * this.batchMs;
    let list = this.due.get(batch);
    if (!list) {
      list = [];
      this.due.set(batch, list);
    }
    list.push(notice);
  }

  /** Removes and returns the batch delivered at `nowMs` (undefined: none). */
  take(nowMs: number): N[] | undefined {
    const list = this.due.get(nowMs);
    if (list) this.due.delete(nowMs);
    return list;
  }
}
