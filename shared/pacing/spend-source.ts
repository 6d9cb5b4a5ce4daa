/**
 * How the pacer reads live spend every tick: one snapshot per plan-day state hash (live counters,
 * contract v1 in docs/spend.md), many hashes per round trip. An interface, so the benchmark and
 * tests can compare implementations: {@link rawSpendSource} (the pacer's) reads the lease script's
 * running sums with one HMGET per hash and folds replies from raw bytes (the whole hash when the
 * sums cannot give the snapshot exactly), {@link pipelinedSpendSource} pipelines ioredis HGETALL
 * grouped by cluster node.
 */
import { pipelineByNode, type RedisClient } from '../redis/connect.js';
import { type HashVisitor, hmgetCommand, RawHashReader } from '../redis/resp/hash-reader.js';
import { parseIntBytes } from '../redis/resp/parser.js';
import { liveHeld, planDaySnapshot } from '../spend/live-counters.js';
import { defaultInFlight, type InFlightConfig } from '../spend/reconcile.js';
import { MAX_SLOT_STEPS, type ReleaseStats, releasableOf, stepReleaseStats } from '../spend/release.js';
import type { AllocationFields, PlanSpendSnapshot } from './types.js';

/** Reads plan-day spend snapshots. */
export interface SpendSource {
  /** Snapshots of the given plan-day state keys at `nowMs`, in the same order. */
  read(stateKeys: readonly string[], nowMs: number): Promise<PlanSpendSnapshot[]>;
  /**
   * The same read delivered in parts of `partSize` keys, in order (one promise per part, the
   * first resolving while later parts are still read); optional: the pacer falls back to `read`.
   */
  readParts?(stateKeys: readonly string[], nowMs: number, partSize: number): Promise<PlanSpendSnapshot[]>[];
}

/** A plan-day that has no live counters (not started today, or Redis lost them). */
export const NO_SPEND: PlanSpendSnapshot = {
  initialised: false,
  confirmedMicros: 0,
  inFlightMicros: 0,
  leasedMicros: 0,
  releasableMicros: 0,
};

/** Options of {@link pipelinedSpendSource}. */
export interface PipelinedSpendSourceOptions {
  /** Commands per pipeline round (rounds overlap). @default 2_000 */
  readonly chunk?: number;
  /** Pipelines in flight at once. @default 4 */
  readonly parallel?: number;
}

/** HGETALL per key, pipelined in chunks grouped by cluster node, parsed with the live-slot rule. */
export function pipelinedSpendSource(
  redis: RedisClient,
  options: PipelinedSpendSourceOptions = {},
): SpendSource {
  const chunk = options.chunk ?? 2_000;
  const parallel = options.parallel ?? 4;
  return {
    async read(stateKeys, nowMs) {
      const out: PlanSpendSnapshot[] = new Array(stateKeys.length);
      let next = 0;
      const worker = async () => {
        for (;;) {
          const from = next;
          if (from >= stateKeys.length) return;
          next += chunk;
          const keys = stateKeys.slice(from, from + chunk);
          const results = await pipelineByNode(
            redis,
            keys,
            (k) => k,
            (p, k) => {
              p.hgetall(k);
            },
          );
          for (let i = 0; i < keys.length; i++) {
            const [error, hash] = results[i] as [Error | null, Record<string, string>];
            if (error) throw error;
            out[from + i] = toSnapshot(hash, nowMs);
          }
        }
      };
      await Promise.all(Array.from({ length: parallel }, worker));
      return out;
    },
  };
}

/** Which allocation fields a read returns: all of them (strict), or only a stale cap (off). */
export type AllocationRead = 'strict' | 'off';

/** The allocation fields of a whole hash (HGETALL object), or undefined when not to report. */
function allocOf(hash: Readonly<Record<string, string>>, mode: AllocationRead): AllocationFields | undefined {
  if (mode === 'off' && hash.a === undefined) return undefined;
  const n = (v: string | undefined) => (v === undefined ? undefined : Number(v));
  return {
    a: n(hash.a),
    ae: n(hash.ae),
    ag: n(hash.ag),
    ar: n(hash.ar),
    ax: n(hash.ax),
    ac: n(hash.ac),
    aw: n(hash.aw),
  };
}

function toSnapshot(
  hash: Record<string, string>,
  nowMs: number,
  mode: AllocationRead = 'off',
): PlanSpendSnapshot {
  const alloc = allocOf(hash, mode);
  if (hash.r === undefined) return alloc ? { ...NO_SPEND, alloc } : NO_SPEND;
  const s = planDaySnapshot(hash, nowMs);
  const snapshot = {
    initialised: true,
    confirmedMicros: s.confirmedMicros,
    inFlightMicros: s.inFlightMicros,
    leasedMicros: s.leasedMicros,
    releasableMicros: s.releasableMicros,
  };
  return alloc ? { ...snapshot, alloc } : snapshot;
}

/**
 * Folds a live-spend state hash (contract v1, docs/spend.md) from its reply bytes: `r` present
 * (initialised), `c` confirmed, and the live `l:<k>` / `f:<k>` slot sums (k ≥ ⌊(now − t) / q⌋).
 */
class SpendVisitor implements HashVisitor<PlanSpendSnapshot> {
  private exists = false;
  private initialised = false;
  private c = 0;
  private q = Number.NaN;
  private t = Number.NaN;
  /** `sk`, `rf`, `rb`, `rn` (NaN: absent) and whether `sl` and `sf` are present (running sums). */
  private sk = Number.NaN;
  private sums = 0;
  private readonly stats: ReleaseStats = { rf: 0, rb: 0, rn: 0 };
  // The slots of the hash being read (kind, slot, value), reused from hash to hash.
  private n = 0;
  private slots = new Float64Array(32);
  private values = new Float64Array(32);
  private kinds = new Uint8Array(32);
  // The allocation fields a, ae, ag, ar, ax, ac, aw (NaN: absent).
  private readonly alloc = new Float64Array(7);

  constructor(
    private readonly nowMs: number,
    private readonly mode: AllocationRead = 'off',
  ) {}

  begin(exists: boolean): void {
    this.exists = exists;
    this.initialised = false;
    this.c = 0;
    this.q = Number.NaN;
    this.t = Number.NaN;
    this.sk = Number.NaN;
    this.sums = 0;
    this.stats.rf = 0;
    this.stats.rb = 0;
    this.stats.rn = 0;
    this.n = 0;
    this.alloc.fill(Number.NaN);
  }

  field(buf: Buffer, fs: number, fe: number, vs: number, ve: number): void {
    const len = fe - fs;
    const b0 = buf[fs];
    if (b0 === 0x61 /* a */ && len <= 2) {
      const i = len === 1 ? 0 : ALLOC_SECOND.indexOf(buf[fs + 1] as number) + 1;
      if (i > 0 || len === 1) this.alloc[i] = parseIntBytes(buf, vs, ve);
    } else if (len === 1) {
      if (b0 === 0x72 /* r */) this.initialised = true;
      else if (b0 === 0x63 /* c */) this.c = parseIntBytes(buf, vs, ve);
      else if (b0 === 0x71 /* q */) this.q = parseIntBytes(buf, vs, ve);
      else if (b0 === 0x74 /* t */) this.t = parseIntBytes(buf, vs, ve);
    } else if (len === 2) {
      const b1 = buf[fs + 1];
      if (b0 === 0x73 /* s */) {
        if (b1 === 0x6b /* k */) this.sk = parseIntBytes(buf, vs, ve);
        else if (b1 === 0x6c /* l */ || b1 === 0x66 /* f */) this.sums++;
      } else if (b0 === 0x72 /* r */) {
        if (b1 === 0x66 /* f */) this.stats.rf = parseIntBytes(buf, vs, ve);
        else if (b1 === 0x62 /* b */) this.stats.rb = parseIntBytes(buf, vs, ve);
        else if (b1 === 0x6e /* n */) this.stats.rn = parseIntBytes(buf, vs, ve);
      }
    } else if (
      len > 2 &&
      buf[fs + 1] === 0x3a /* : */ &&
      (b0 === 0x6c /* l */ || b0 === 0x66 /* f */ || b0 === 0x62) /* b */
    ) {
      const i = this.n++;
      if (i === this.kinds.length) this.grow();
      this.kinds[i] = b0;
      this.slots[i] = parseIntBytes(buf, fs + 2, fe);
      this.values[i] = parseIntBytes(buf, vs, ve);
    }
  }

  private grow(): void {
    const size = this.kinds.length * 2;
    const slots = new Float64Array(size);
    slots.set(this.slots);
    const values = new Float64Array(size);
    values.set(this.values);
    const kinds = new Uint8Array(size);
    kinds.set(this.kinds);
    this.slots = slots;
    this.values = values;
    this.kinds = kinds;
  }

  end(): PlanSpendSnapshot {
    const alloc = allocFromArray(this.alloc, 0, this.mode);
    if (!this.exists || !this.initialised) return alloc ? { ...NO_SPEND, alloc } : NO_SPEND;
    const kmin = Math.floor((this.nowMs - this.t) / this.q);
    let leased = 0;
    let inFlight = 0;
    let bids = 0;
    let dead: Map<number, { f: number; b: number | undefined }> | undefined;
    for (let i = 0; i < this.n; i++) {
      const slot = this.slots[i] as number;
      const kind = this.kinds[i];
      const value = this.values[i] as number;
      if (slot < kmin) {
        // Dead slots a lease call would fold into the release statistics (see planDaySnapshot).
        if (kind === 0x6c) continue;
        dead ??= new Map();
        const d = dead.get(slot) ?? { f: 0, b: undefined };
        if (kind === 0x66) d.f = value;
        else d.b = value;
        dead.set(slot, d);
        continue;
      }
      if (kind === 0x6c) leased += value;
      else if (kind === 0x66) inFlight += value;
      else bids += value;
    }
    if (dead && this.sums === 2 && !Number.isNaN(this.sk) && kmin - this.sk <= MAX_SLOT_STEPS) {
      for (let k = this.sk; k < kmin; k++) {
        const d = dead.get(k);
        if (d?.b !== undefined) stepReleaseStats(this.stats, d.f, d.b);
      }
    }
    const snapshot = {
      initialised: true,
      confirmedMicros: this.c,
      // As planDaySnapshot: a negative in-flight sum comes off the leased float (liveHeld).
      ...liveHeld(leased, inFlight),
      releasableMicros: releasableOf(this.stats, bids),
    };
    return alloc ? { ...snapshot, alloc } : snapshot;
  }

  fromObject(hash: Readonly<Record<string, string>>): PlanSpendSnapshot {
    return toSnapshot(hash as Record<string, string>, this.nowMs, this.mode);
  }
}

/** Second bytes of `ae`, `ag`, `ar`, `ax`, `ac`, `aw` (slots 1–6 of the allocation fields). */
const ALLOC_SECOND = [0x65, 0x67, 0x72, 0x78, 0x63, 0x77];

/** The allocation fields `a ae ag ar ax ac aw` in this order. */
const ALLOC_FIELDS = ['a', 'ae', 'ag', 'ar', 'ax', 'ac', 'aw'] as const;

/**
 * The allocation fields from `values[at..at+7)` (NaN = absent), or undefined when the read does
 * not report them (off and no cap stored).
 */
function allocFromArray(
  values: Float64Array,
  at: number,
  mode: AllocationRead,
): AllocationFields | undefined {
  const v = (i: number) => {
    const x = values[at + i] as number;
    return Number.isNaN(x) ? undefined : x;
  };
  const a = v(0);
  if (mode === 'off' && a === undefined) return undefined;
  return { a, ae: v(1), ag: v(2), ar: v(3), ax: v(4), ac: v(5), aw: v(6) };
}

/** The fields the sums read asks for first: HMGET reply positions 0–10, then the dead slots'. */
const SUMS_FIELDS = ['r', 'c', 'q', 't', 'sk', 'sl', 'sf', 'sb', 'rf', 'rb', 'rn'] as const;
/** Fields per dead slot the sums read asks for: `l:`, `f:`, `b:`. */
const PER_SLOT = 3;

/**
 * Folds the HMGET of the sums read (docs/spend.md, "Running sums"): `sl` / `sf` hold the `l:` /
 * `f:` fields of the slots from `sk` up, and no slot field below `sk` exists, so the live sums at
 * kmin are `sl` / `sf` less the fields of the slots in [sk, kmin) — the `back` slots below kmin
 * the read asked for. `undefined` (read the whole hash) when that is not exact: no sums (a hash
 * from before them, or after a rebuild, until its next lease), sums older than `back` slots (no
 * lease for that long), another slot length or lifetime than the read assumed, or a value that is
 * not an integer.
 */
class SumsVisitor implements HashVisitor<PlanSpendSnapshot | undefined> {
  private readonly values: Float64Array;
  private initialised = false;

  /**
   * @param kmin the first live slot at the read's instant for (`slotMs`, `ttlMs`)
   * @param back slots below kmin whose `l:` / `f:` fields follow the sums fields in the command
   */
  constructor(
    private readonly nowMs: number,
    private readonly slotMs: number,
    private readonly ttlMs: number,
    private readonly kmin: number,
    private readonly back: number,
    private readonly mode: AllocationRead,
  ) {
    this.allocAt = SUMS_FIELDS.length + PER_SLOT * back;
    this.values = new Float64Array(this.allocAt + (mode === 'strict' ? ALLOC_FIELDS.length : 1));
  }

  /** Where the allocation fields start in the HMGET reply (after the dead slots' fields). */
  private readonly allocAt: number;

  begin(): void {
    this.initialised = false;
  }

  field(): void {
    // HMGET replies come through `item`.
  }

  item(index: number, buf: Buffer, start: number, end: number): void {
    if (index === 0) this.initialised = start >= 0;
    // An allocation field: NaN when absent.
    else if (index >= this.allocAt)
      this.values[index] = start < 0 ? Number.NaN : parseIntBytes(buf, start, end);
    // A nil counts 0 in a slot's sum and as absent for a sums field (−0: see `end`).
    else this.values[index] = start < 0 ? -0 : parseIntBytes(buf, start, end);
  }

  end(): PlanSpendSnapshot | undefined {
    const v = this.values;
    let alloc: AllocationFields | undefined;
    if (this.mode === 'strict') alloc = allocFromArray(v, this.allocAt, 'strict');
    else if (!Number.isNaN(v[this.allocAt] as number)) alloc = { a: v[this.allocAt] as number };
    if (!this.initialised) return alloc ? { ...NO_SPEND, alloc } : NO_SPEND;
    if (v[2] !== this.slotMs || v[3] !== this.ttlMs) return undefined;
    const sk = v[4] as number;
    let leased = v[5] as number;
    let inFlight = v[6] as number;
    // A nil sums field reads as −0 (absent); a real field never does (parseIntBytes gives +0).
    if (Object.is(sk, -0) || Object.is(leased, -0) || Object.is(inFlight, -0)) return undefined;
    if (!(Number.isSafeInteger(sk) && Number.isSafeInteger(leased) && Number.isSafeInteger(inFlight))) {
      return undefined;
    }
    const confirmed = v[1] as number;
    if (Number.isNaN(confirmed)) return undefined;
    // Absent (−0) counts 0: a hash with sums from before the release statistics has no `b:` field.
    let bids = (v[7] as number) + 0;
    const stats: ReleaseStats = {
      rf: (v[8] as number) + 0,
      rb: (v[9] as number) + 0,
      rn: (v[10] as number) + 0,
    };
    if (Number.isNaN(bids) || Number.isNaN(stats.rf) || Number.isNaN(stats.rb) || Number.isNaN(stats.rn)) {
      return undefined;
    }
    if (sk < this.kmin) {
      const first = this.kmin - this.back;
      if (sk < first) return undefined;
      for (let j = sk - first; j < this.back; j++) {
        const at = SUMS_FIELDS.length + PER_SLOT * j;
        const l = v[at] as number;
        const f = v[at + 1] as number;
        const b = v[at + 2] as number;
        if (Number.isNaN(l) || Number.isNaN(f) || Number.isNaN(b)) return undefined;
        leased -= l;
        inFlight -= f;
        bids -= b;
        // A nil b (−0): the slot had no settled bids, as the script sees it.
        if (!Object.is(b, -0)) stepReleaseStats(stats, f, b);
      }
    }
    const snapshot = {
      initialised: true,
      confirmedMicros: confirmed + 0,
      ...liveHeld(leased, inFlight),
      releasableMicros: releasableOf(stats, bids),
    };
    return alloc ? { ...snapshot, alloc } : snapshot;
  }

  fromObject(hash: Readonly<Record<string, string>>): PlanSpendSnapshot {
    return toSnapshot(hash as Record<string, string>, this.nowMs, this.mode);
  }
}

/** Options of {@link rawSpendSource}. */
export interface RawSpendSourceOptions {
  /**
   * Read the lease script's running sums (one HMGET of 11 + 3 × `slotsBack` fields per hash)
   * instead of every field; a hash whose sums cannot give the snapshot exactly is then read whole
   * (HGETALL). False: every hash read whole. Both give the same snapshots. @default true
   */
  readonly sums?: boolean;
  /**
   * The guards' in-flight settings (slot width, lifetime): which slot fields the sums read asks
   * for. A hash stored with other settings is read whole. @default defaultInFlight
   */
  readonly inFlight?: InFlightConfig;
  /**
   * Dead slots below the first live one whose fields the sums read asks for: a plan-day whose
   * last lease call is older than that is read whole. @default 2
   */
  readonly slotsBack?: number;
  /**
   * `strict` (several regions): every snapshot carries the allocation fields `a ae ag ar ax ac`
   * (6 more HMGET fields). `off`: only a stored cap `a` is asked for (one field), reported when
   * present so the pacer can remove it. @default 'off'
   */
  readonly allocations?: AllocationRead;
  /**
   * Longest silence of a node while the read waits for replies, ms (RawHashReader's `timeoutMs`:
   * progress, not duration); the pacer function passes its `PACER_REDIS_SILENCE_MS`.
   * @default 1000
   */
  readonly timeoutMs?: number;
}

/** Counters of a {@link rawSpendSource} (tests, benchmarks). */
export interface RawSpendSourceStats {
  /** Hashes whose snapshot came from the running sums. */
  sums: number;
  /** Hashes read whole (sums off, absent or not exact for the read). */
  whole: number;
}

/**
 * The pacer's spend read over raw RESP connections, folded from the reply bytes
 * (shared/redis/resp/hash-reader.ts), several times faster than ioredis objects: by default the running
 * sums (an HMGET of 11 fields instead of ~31: half Redis's time and a third of the bytes), and
 * HGETALL — on a second connection, as soon as a part's replies show which — for the hashes the
 * sums cannot answer exactly. Its connections authenticate as the client does (with IAM auth,
 * with the current token).
 */
export function rawSpendSource(
  redis: RedisClient,
  options: RawSpendSourceOptions = {},
): SpendSource & { close(): void; readonly stats: RawSpendSourceStats } {
  const timeout = options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs };
  const reader = new RawHashReader({ client: redis, ...timeout });
  const stats: RawSpendSourceStats = { sums: 0, whole: 0 };
  // With the sums: the hashes they cannot answer, read whole on their own connection, so they need
  // not wait for the rest of the sums read.
  const wholeReader = options.sums === false ? undefined : new RawHashReader({ client: redis, ...timeout });
  const { slotMs, ttlMs } = options.inFlight ?? defaultInFlight;
  const back = Math.max(0, Math.floor(options.slotsBack ?? 2));
  const mode = options.allocations ?? 'off';
  const readParts = (stateKeys: readonly string[], nowMs: number, partSize: number) => {
    if (wholeReader === undefined) {
      stats.whole += stateKeys.length;
      return reader.readParts(stateKeys, new SpendVisitor(nowMs, mode), partSize);
    }
    const kmin = Math.floor((nowMs - ttlMs) / slotMs);
    const fields: string[] = [...SUMS_FIELDS];
    for (let k = kmin - back; k < kmin; k++) fields.push(`l:${k}`, `f:${k}`, `b:${k}`);
    if (mode === 'strict') fields.push(...ALLOC_FIELDS);
    else fields.push('a');
    const visitor = new SumsVisitor(nowMs, slotMs, ttlMs, kmin, back, mode);
    const size = Math.max(1, Math.floor(partSize));
    const parts = reader.readParts(stateKeys, visitor, size, hmgetCommand(fields));
    return parts.map((part, k) => {
      const done = part.then(async (got) => {
        const missing: number[] = [];
        for (let j = 0; j < got.length; j++) if (got[j] === undefined) missing.push(j);
        stats.sums += got.length - missing.length;
        stats.whole += missing.length;
        if (missing.length > 0) {
          const from = k * size;
          const whole = await wholeReader.read(
            missing.map((j) => stateKeys[from + j] as string),
            new SpendVisitor(nowMs, mode),
          );
          for (let m = 0; m < missing.length; m++) got[missing[m] as number] = whole[m];
        }
        return got as PlanSpendSnapshot[];
      });
      // Handled here too: a caller that stops at a failed part never awaits the later ones.
      done.catch(() => {});
      return done;
    });
  };
  return {
    stats,
    read: async (stateKeys, nowMs) => (await readParts(stateKeys, nowMs, stateKeys.length)[0]) ?? [],
    readParts,
    close: () => {
      reader.close();
      wholeReader?.close();
    },
  };
}
