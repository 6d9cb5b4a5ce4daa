/**
 * Pieces both simulation engines share — the scenario runner (`runner.ts`) and the regions
 * engine (`regions/engine.ts`): the in-memory ledger, the advertiser-day cache, the batched
 * notice queue, the arm draw and the fixed identity a simulated pacer ticks as.
 */
import { type DayWindow, dayWindow } from '../shared/budget/time-zone.js';
import type { ControlSnapshot } from '../shared/pacing/control.js';
import type { LeaseView } from '../shared/pacing/lease.js';
import type { TickIdentity } from '../shared/pacing/tick-outcome.js';
import type { LedgerEntry, LedgerStore } from '../shared/spend/ledger.js';
import type { ScenarioCampaign } from './scenario.js';

/**
 * The ledger's contract in memory (first write of a bid wins, entries per campaign-day, start
 * markers). The DynamoDB ledger's own behaviour is tested on dynalite in test/integration/spend/;
 * dynalite would not take a simulated day's writes in test time.
 *
 * Entries are kept as columns per campaign-day (typed arrays, and an index from bid id to row),
 * not as the entry objects: a simulated day books millions of wins, and as objects they would be
 * most of the old generation by the evening, which every scavenge and mark-compact pays for
 * (docs/pacing-quality.md, "Speed"). Entries are rebuilt as objects when read back.
 */
export function memoryLedger(): LedgerStore {
  const days = new Map<string, Map<string, LedgerDay>>();
  const markers = new Set<string>();
  let lastCampaign: string | undefined;
  let lastDays: Map<string, LedgerDay> | undefined;
  const dayOf = (campaignId: string, day: string, create: boolean): LedgerDay | undefined => {
    let byDay = campaignId === lastCampaign ? lastDays : days.get(campaignId);
    if (!byDay) {
      if (!create) return undefined;
      byDay = new Map();
      days.set(campaignId, byDay);
    }
    lastCampaign = campaignId;
    lastDays = byDay;
    let d = byDay.get(day);
    if (!d && create) {
      d = new LedgerDay(campaignId, day);
      byDay.set(day, d);
    }
    return d;
  };
  return {
    async record(entry) {
      const d = dayOf(entry.campaignId, entry.day, true) as LedgerDay;
      const row = d.rowOf(entry.bidId);
      // One region's ledger: every entry is its own.
      if (row >= 0) return { created: false, entry: d.entry(row), own: true };
      d.add(entry);
      return { created: true, entry, own: true };
    },
    async entries(campaignId, day, armId) {
      const d = dayOf(campaignId, day, false);
      if (!d) return [];
      const all: LedgerEntry[] = [];
      for (let row = 0; row < d.count; row++) {
        if (armId === undefined || d.armOf(row) === armId) all.push(d.entry(row));
      }
      return all;
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
 * A bid id the index keys by number: a prefix of non-digits and a canonical integer (no leading
 * zero, a safe integer), e.g. the simulator's `b12345`. Any other id is keyed by its text.
 */
const NUMBERED_ID = /^(\D*)([1-9]\d{0,14}|0)$/;

/**
 * The value of `text` from `from` on when it is a canonical integer of at most 15 digits (what
 * {@link NUMBERED_ID}'s second group accepts), else −1.
 */
function canonicalInteger(text: string, from: number): number {
  const length = text.length - from;
  if (length < 1 || length > 15) return -1;
  if (length > 1 && text.charCodeAt(from) === 0x30) return -1;
  let n = 0;
  for (let i = from; i < text.length; i++) {
    const d = text.charCodeAt(i) - 0x30;
    if (d < 0 || d > 9) return -1;
    n = n * 10 + d;
  }
  return n;
}

/** One campaign-day of {@link memoryLedger}: columns, in booking order. */
class LedgerDay {
  count = 0;
  /** Bid id → row: by number for ids of the day's numbered form, else by text. */
  private readonly rows = new Map<number | string, number>();
  /** The prefix of the day's numbered ids (set by the first one). */
  private prefix: string | undefined;
  private number = new Float64Array(16);
  /** Ids not in the numbered form, by row. */
  private readonly textIds = new Map<number, string>();
  private clearing = new Float64Array(16);
  private bidPrice = new Float64Array(16);
  private bidAt = new Float64Array(16);
  private noticeAt = new Float64Array(16);
  private late = new Uint8Array(16);
  /** Index into `names` (accounts and arms share it); −1: no arm. */
  private account = new Int32Array(16);
  private arm = new Int32Array(16);
  private readonly names: string[] = [];
  private readonly nameIndex = new Map<string, number>();

  constructor(
    readonly campaignId: string,
    readonly day: string,
  ) {}

  /** The key of `bidId` in `rows` (a number when it has the day's numbered form). */
  private keyOf(bidId: string, settle: boolean): number | string {
    // The common case without a regex match (an array per call): the day's prefix, then digits.
    const known = this.prefix;
    if (known !== undefined && bidId.startsWith(known)) {
      const n = canonicalInteger(bidId, known.length);
      if (n >= 0) return n;
    }
    const m = NUMBERED_ID.exec(bidId);
    if (!m) return bidId;
    const prefix = m[1] as string;
    if (this.prefix === undefined && settle) this.prefix = prefix;
    return prefix === this.prefix ? Number(m[2]) : bidId;
  }

  rowOf(bidId: string): number {
    return this.rows.get(this.keyOf(bidId, false)) ?? -1;
  }

  armOf(row: number): string | undefined {
    const a = this.arm[row] as number;
    return a < 0 ? undefined : this.names[a];
  }

  add(e: LedgerEntry): void {
    const row = this.count++;
    if (row === this.clearing.length) this.grow();
    const key = this.keyOf(e.bidId, true);
    this.rows.set(key, row);
    if (typeof key === 'number') this.number[row] = key;
    else {
      this.number[row] = Number.NaN;
      this.textIds.set(row, key);
    }
    this.clearing[row] = e.clearingPriceMicros;
    this.bidPrice[row] = e.bidPriceMicros;
    this.bidAt[row] = e.bidAt;
    this.noticeAt[row] = e.noticeAt;
    this.late[row] = e.late ? 1 : 0;
    this.account[row] = this.nameOf(e.accountId);
    this.arm[row] = e.armId === undefined ? -1 : this.nameOf(e.armId);
  }

  /** The entry of `row`, as it was booked. */
  entry(row: number): LedgerEntry {
    const n = this.number[row] as number;
    const armId = this.armOf(row);
    return {
      campaignId: this.campaignId,
      accountId: this.names[this.account[row] as number] as string,
      ...(armId === undefined ? {} : { armId }),
      bidId: Number.isNaN(n) ? (this.textIds.get(row) as string) : `${this.prefix}${n}`,
      day: this.day,
      clearingPriceMicros: this.clearing[row] as number,
      bidPriceMicros: this.bidPrice[row] as number,
      bidAt: this.bidAt[row] as number,
      noticeAt: this.noticeAt[row] as number,
      late: this.late[row] === 1,
    };
  }

  private nameOf(name: string): number {
    let i = this.nameIndex.get(name);
    if (i === undefined) {
      i = this.names.length;
      this.names.push(name);
      this.nameIndex.set(name, i);
    }
    return i;
  }

  private grow(): void {
    const size = this.clearing.length * 2;
    const f64 = (a: Float64Array) => {
      const b = new Float64Array(size);
      b.set(a);
      return b;
    };
    const i32 = (a: Int32Array) => {
      const b = new Int32Array(size);
      b.set(a);
      return b;
    };
    this.number = f64(this.number);
    this.clearing = f64(this.clearing);
    this.bidPrice = f64(this.bidPrice);
    this.bidAt = f64(this.bidAt);
    this.noticeAt = f64(this.noticeAt);
    const late = new Uint8Array(size);
    late.set(this.late);
    this.late = late;
    this.account = i32(this.account);
    this.arm = i32(this.arm);
  }
}

/**
 * The advertiser day of an instant in a zone (`dayWindow`, which remembers the last day per zone:
 * a simulation asks for the same few days millions of times).
 */
export function dayWindows(): (timeZone: string, nowMs: number) => DayWindow {
  return (timeZone, nowMs) => dayWindow(nowMs, timeZone);
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

/**
 * The arm of a campaign a request falls into: `u` is the request's draw for the campaign (below
 * its reach: the request is in its audience), spread over the arms by their shares; undefined
 * for a campaign without arms.
 */
export function armOf(spec: ScenarioCampaign, u: number): string | undefined {
  if (spec.arms.length === 0) return undefined;
  let armId: string | undefined;
  let x = u / spec.reach;
  for (const a of spec.arms) {
    armId = a.id;
    x -= a.share;
    if (x < 0) break;
  }
  return armId;
}

/** Options of {@link fixedIdentity}. */
export interface FixedIdentityOptions {
  readonly instanceId: string;
  readonly publisherId: string;
  /** The control parameters' `publisher-region`. */
  readonly publisherRegion: string;
  /** The lease epoch the instance holds on every tick; undefined: it follows (never holds it). */
  readonly epoch: number | undefined;
  /** Version of `publisher-region` (the fence's generation). @default 1 */
  readonly generation?: number;
  /** When the control parameters were read. @default 0 */
  readonly readAtMs?: number;
}

/**
 * Who a pacer tick runs as when nothing about its lease or control parameters ever changes: the
 * lease held at `epoch` on every tick (or never, for a follower), the leader override `auto`
 * (version 1), the parameters always fresh. A simulated process has no lease table or SSM; the
 * benchmarks and tests that drive a `ShardPacer` directly tick as one too.
 */
export function fixedIdentity(o: FixedIdentityOptions): TickIdentity {
  const leads = o.epoch !== undefined;
  const control: ControlSnapshot = {
    publisherRegion: o.publisherRegion,
    generation: o.generation ?? 1,
    override: 'auto',
    overrideVersion: 1,
    readAtMs: o.readAtMs ?? 0,
    fresh: true,
  };
  const lease: LeaseView = leads
    ? { held: true, epoch: o.epoch as number, record: undefined, event: 'renewed' }
    : { held: false, epoch: 0, record: undefined, event: 'follower' };
  return {
    instanceId: o.instanceId,
    publisherId: o.publisherId,
    lease: { tick: async () => lease, heldAt: () => leads, epoch: o.epoch ?? 0 },
    control: { read: async () => ({ snapshot: control }) },
  };
}
