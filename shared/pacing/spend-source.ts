/**
 * How the pacer reads live spend every tick: one snapshot per plan-day state hash (live counters,
 * contract v1 in docs/spend.md), many hashes per round trip. An interface, so the benchmark and
 * tests can compare implementations; the default pipelines HGETALL grouped by cluster node.
 */
import { pipelineByNode, type RedisClient } from '../redis/connect.js';
import { planDaySnapshot } from '../spend/live-counters.js';
import type { PlanSpendSnapshot } from './types.js';

/** Reads plan-day spend snapshots. */
export interface SpendSource {
  /** Snapshots of the given plan-day state keys at `nowMs`, in the same order. */
  read(stateKeys: readonly string[], nowMs: number): Promise<PlanSpendSnapshot[]>;
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
