/**
 * Pacer sharding: an account (with all its campaigns and plans) belongs to shard
 * `fnv1a32(utf8(accountId)) mod N`. Sharding by account keeps an account plan and every campaign
 * it constrains in one shard, so one pacer sees everything a bid of the account needs.
 *
 * Writers of the budgets table (BudgetRepository) tag each item with {@link pacerShardKey}; the
 * table's `by-pacer-shard` index is keyed by it, so a pacer queries only its shard (no scan).
 * The key embeds N, so items written with another N are never mistaken for this layout's: the
 * re-shard procedure (docs/pacing.md) rewrites them.
 */
import { PacelineError } from '../errors.js';

const encoder = new TextEncoder();

/** 32-bit FNV-1a of bytes (offset basis 2166136261, prime 16777619), unsigned. */
export function fnv1a32(bytes: Uint8Array): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < bytes.length; i++) {
    h ^= bytes[i] as number;
    // h × 16777619 mod 2^32 without losing bits to float rounding: 16777619 = 2^24 + 403.
    h = (h + (h << 1) + (h << 4) + (h << 7) + (h << 8) + (h << 24)) >>> 0;
  }
  return h >>> 0;
}

/** Thrown for a shard count that is not a whole number ≥ 1. */
export class InvalidShardCountError extends PacelineError {
  override readonly name = 'InvalidShardCountError';
  override readonly code = 'pacing.invalid-shard-count';
  constructor(readonly shards: unknown) {
    super(
      `Pacer shard count ${JSON.stringify(shards)} is invalid: give a whole number ≥ 1 (the region's ` +
        'PACER_SHARDS, also in the SSM parameter /paceline/<region>/pacer/shards).',
    );
  }
}

function assertShards(shards: number): void {
  if (!Number.isSafeInteger(shards) || shards < 1) throw new InvalidShardCountError(shards);
}

/** The shard of an account: `fnv1a32(utf8(accountId)) mod shards`. */
export function shardOfAccount(accountId: string, shards: number): number {
  assertShards(shards);
  return fnv1a32(encoder.encode(accountId)) % shards;
}

/** Value of the `pacerShard` index key of shard `shard` of `shards`: `<N>:<shard>`. */
export function pacerShardKey(shard: number, shards: number): string {
  assertShards(shards);
  if (!Number.isSafeInteger(shard) || shard < 0 || shard >= shards) {
    throw new RangeError(`Shard ${shard} is outside 0..${shards - 1}.`);
  }
  return `${shards}:${shard}`;
}

/** The `pacerShard` index key of an account's items. */
export function accountShardKey(accountId: string, shards: number): string {
  return pacerShardKey(shardOfAccount(accountId, shards), shards);
}
