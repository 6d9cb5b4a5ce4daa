/**
 * The Redis keys of a user's key group (docs/counting.md, "Keys"): all in one hash slot, the
 * user's id between the braces, so the ingest script and a cap check's snapshot touch one node.
 */

/** Version of the key schema; part of every key. v1 deduplicated on the full bytes only. */
export const KEY_SCHEMA_VERSION = 2;

/** The Redis key of a user's occurrence set (dedup, retention order). */
export function userKey(userId: string, prefix = 'act', version = KEY_SCHEMA_VERSION): string {
  return `${prefix}:v${version}:{${userId}}`;
}

/** The Redis key of a user's day summary (counting-days.lua). Same slot as {@link userKey}. */
export function userDaysKey(userId: string, prefix = 'act'): string {
  return `${userKey(userId, prefix)}:days`;
}

/** The Redis key of the aggregates of a user's day summary. Same slot as {@link userKey}. */
export function userAggregatesKey(userId: string, prefix = 'act'): string {
  return `${userKey(userId, prefix)}:agg`;
}

/** The Redis key of a user's packed event log (what readers GET). Same slot as {@link userKey}. */
export function userLogKey(userId: string, prefix = 'act', version = KEY_SCHEMA_VERSION): string {
  return `${prefix}:v${version}:{${userId}}:log`;
}

/**
 * The Redis key of a user's cap log, the compact copy of its events that cap checks read
 * (counting-caplog.lua). Same slot as {@link userKey}.
 */
export function userCapLogKey(userId: string, prefix = 'act'): string {
  return `${userKey(userId, prefix)}:cap`;
}

/** The Redis key of the tuple index of a user's cap log (written by the ingest script only). */
export function userCapTuplesKey(userId: string, prefix = 'act'): string {
  return `${userKey(userId, prefix)}:tix`;
}
