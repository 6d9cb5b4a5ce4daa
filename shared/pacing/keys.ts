/**
 * The Redis key schema of published pacing parameters, version 1 — a contract other languages
 * read (docs/pacing.md, "Redis contract"). Every key of shard `s` carries the hash tag `{pp:<s>}`,
 * so the shard's claim and all its writes live in one slot: one Lua script checks the claim and
 * writes atomically, in cluster mode too.
 *
 * - `pp:1:{pp:<s>}:claim`            hash   the shard's last claim (fence g, o, e; tick t; publisher p; at) and
 *                                           last completed publish (pt, pat, rp: readers' freshness, v2)
 * - `pp:1:{pp:<s>}:c:<campaignId>`   hash   everything a bid of the campaign needs (one HGETALL)
 * - `pp:1:{pp:<s>}:st`               hash   controller state per plan, `<scope>:<planId>` → encoded
 * - `pp:1:{pp:<s>}:fc`               hash   traffic forecast per plan, `<scope>:<planId>` → encoded
 * - `pp:1:{pp:<s>}:bud`              hash   the shard's budgets snapshot, `<pk>|<sk>` → item JSON, `~meta`
 * - `pp:1:{pp:<s>}:log`              stream audit of claims and publishes (accepted and rejected)
 */
import { fnv1a32 } from './shard.js';

/** Key schema version (the `1` in `pp:1:`). */
export const PACING_KEY_VERSION = 1;

/** Keys of one pacer shard. */
export interface ShardKeys {
  readonly claim: string;
  readonly state: string;
  readonly forecast: string;
  readonly budgets: string;
  readonly log: string;
  campaign(campaignId: string): string;
}

/** Keys of shard `shard`. */
export function shardKeys(shard: number): ShardKeys {
  const base = `pp:${PACING_KEY_VERSION}:{pp:${shard}}`;
  return {
    claim: `${base}:claim`,
    state: `${base}:st`,
    forecast: `${base}:fc`,
    budgets: `${base}:bud`,
    log: `${base}:log`,
    campaign: (campaignId) => `${base}:c:${campaignId}`,
  };
}

const encoder = new TextEncoder();

/**
 * The key of a campaign's parameters, found from the campaign and its account alone: readers
 * compute the shard as the pacer does (fnv1a32(utf8(accountId)) mod N).
 */
export function campaignParamsKey(accountId: string, campaignId: string, shards: number): string {
  return shardKeys(fnv1a32(encoder.encode(accountId)) % shards).campaign(campaignId);
}

/** The claim key of the account's shard (readers take the shard's freshness from it, v2). */
export function shardClaimKey(accountId: string, shards: number): string {
  return shardKeys(fnv1a32(encoder.encode(accountId)) % shards).claim;
}

const fields = new WeakMap<object, string>();

/** Field of a plan in the state and forecast hashes: `<scope>:<planId>` (unique in the shard). */
export function planField(plan: { readonly scope: string; readonly planId: string }): string {
  let f = fields.get(plan);
  if (f === undefined) {
    f = `${plan.scope}:${plan.planId}`;
    fields.set(plan, f);
  }
  return f;
}
