/**
 * How the pacer reads live spend every tick: one snapshot per plan-day state hash (live counters,
 * contract v1 in docs/spend.md), many hashes per round trip. An interface, so the benchmark and
 * tests can compare implementations: {@link rawSpendSource} (the pacer's) folds replies from raw
 * bytes, {@link pipelinedSpendSource} pipelines ioredis HGETALL grouped by cluster node.
 */
import { pipelineByNode, type RedisClient } from '../redis/connect.js';
import { type HashVisitor, parseIntBytes, RawHashReader } from '../redis/raw-hgetall.js';
import { planDaySnapshot } from '../spend/live-counters.js';
import type { PlanSpendSnapshot } from './types.js';

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

function toSnapshot(hash: Record<string, string>, nowMs: number): PlanSpendSnapshot {
  if (hash.r === undefined) return NO_SPEND;
  const s = planDaySnapshot(hash, nowMs);
  return {
    initialised: true,
    confirmedMicros: s.confirmedMicros,
    inFlightMicros: s.inFlightMicros,
    leasedMicros: s.leasedMicros,
  };
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
  // The live slots of the hash being read (kind, slot, value), reused from hash to hash.
  private n = 0;
  private slots = new Float64Array(32);
  private values = new Float64Array(32);
  private kinds = new Uint8Array(32);

  constructor(private readonly nowMs: number) {}

  begin(exists: boolean): void {
    this.exists = exists;
    this.initialised = false;
    this.c = 0;
    this.q = Number.NaN;
    this.t = Number.NaN;
    this.n = 0;
  }

  field(buf: Buffer, fs: number, fe: number, vs: number, ve: number): void {
    const len = fe - fs;
    const b0 = buf[fs];
    if (len === 1) {
      if (b0 === 0x72 /* r */) this.initialised = true;
      else if (b0 === 0x63 /* c */) this.c = parseIntBytes(buf, vs, ve);
      else if (b0 === 0x71 /* q */) this.q = parseIntBytes(buf, vs, ve);
      else if (b0 === 0x74 /* t */) this.t = parseIntBytes(buf, vs, ve);
    } else if (len > 2 && buf[fs + 1] === 0x3a /* : */ && (b0 === 0x6c /* l */ || b0 === 0x66) /* f */) {
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
    if (!this.exists || !this.initialised) return NO_SPEND;
    const kmin = Math.floor((this.nowMs - this.t) / this.q);
    let leased = 0;
    let inFlight = 0;
    for (let i = 0; i < this.n; i++) {
      if ((this.slots[i] as number) < kmin) continue;
      if (this.kinds[i] === 0x6c) leased += this.values[i] as number;
      else inFlight += this.values[i] as number;
    }
    return {
      initialised: true,
      confirmedMicros: this.c,
      leasedMicros: Math.max(0, leased),
      inFlightMicros: Math.max(0, inFlight),
    };
  }

  fromObject(hash: Readonly<Record<string, string>>): PlanSpendSnapshot {
    return toSnapshot(hash, this.nowMs);
  }
}

/**
 * HGETALL of every plan-day over raw RESP connections, folded from the reply bytes
 * (shared/redis/raw-hgetall.ts): the pacer's default, several times faster than ioredis objects.
 * Its connections authenticate as the client does (with IAM auth, with the current token).
 */
export function rawSpendSource(redis: RedisClient): SpendSource & { close(): void } {
  const reader = new RawHashReader({ client: redis });
  return {
    read: (stateKeys, nowMs) => reader.read(stateKeys, new SpendVisitor(nowMs)),
    readParts: (stateKeys, nowMs, partSize) => reader.readParts(stateKeys, new SpendVisitor(nowMs), partSize),
    close: () => reader.close(),
  };
}
