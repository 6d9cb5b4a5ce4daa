/**
 * The fence every published write carries: the tuple (g, o, e) compared lexicographically, plus
 * the tick t.
 *
 * - g: generation — the version of the region's `publisher-region` SSM parameter (publishing moves
 *   between regions by flipping it; a flip outranks every older claim);
 * - o: the version of the shard's leader-override SSM parameter (setting or clearing an override
 *   outranks every claim made before it, without DynamoDB);
 * - e: the lease epoch of the publisher (0 when an override names the publisher).
 *
 * A claim of (fence, t) succeeds iff fence ≥ the stored fence and t > the stored tick (Lua in
 * Redis, shared/pacing/publisher.ts): at most one publisher per (shard, tick), and a fence that
 * lost can never win again. Pure functions only.
 */

/** A fence tuple. */
export interface Fence {
  readonly g: number;
  readonly o: number;
  readonly e: number;
}

/** Lexicographic comparison: negative when a < b, 0 when equal, positive when a > b. */
export function compareFence(a: Fence, b: Fence): number {
  return a.g - b.g || a.o - b.o || a.e - b.e;
}

/** `g.o.e`, the fence's form in the published hashes and the audit log. */
export function formatFence(f: Fence): string {
  return `${f.g}.${f.o}.${f.e}`;
}

/** Parses {@link formatFence}'s output; undefined when malformed. */
export function parseFence(raw: string | undefined): Fence | undefined {
  if (raw === undefined) return undefined;
  const m = /^(\d+)\.(\d+)\.(\d+)$/.exec(raw);
  if (!m) return undefined;
  const [g, o, e] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (![g, o, e].every(Number.isSafeInteger)) return undefined;
  return { g, o, e };
}
