/**
 * The items of the `region-spend` global table (docs/pacing.md, "Many regions"), pure: how they are
 * written (in parts by plan hash), read back into one view per shard, and the store they live in
 * (DynamoDB, or an in-memory replica the simulator can drive).
 *
 * pk `<N>:<shard>`; every item has ONE writer (global tables are last writer wins per item):
 * - region item, sk `<region>` (or `<region>#<part>`), written by the pacer publishing into that
 *   region's cache: `plans` = {"<scope>:<planId>|<day>": [spentMicros, demandMicrosPerSec]}
 *   (the share rule's summary, unchanged for one region) and, with allocations, `alloc` =
 *   {key: [rel, want, seenG, seenX, ae, fence, home]} (its mailbox to the home) and `um` = the
 *   keys whose demand is not measured yet (JSON list);
 * - authority item, sk `alloc#<home>` (or `alloc#<home>#<part>`), written by the home region's
 *   shard lease holder: `regions` = [r…], `plans` = {key: [fence, [g…], [x…], [rb…], [ack…], [rs…]]}
 *   aligned with `regions`, plus `epoch` (its lease epoch).
 * Both carry `tick`, `atMs`, `writer`, `parts`. A plan-day's entries are in part
 * fnv1a32(key) mod parts, parts a power of two chosen so every part stays far below DynamoDB's
 * 400 KB item limit ({@link PART_TARGET_BYTES}); a reader takes each key from the part with the
 * highest tick, so a changed part count or a part not replicated yet reads as a lagging entry.
 */

import { fnv1a32 } from '../shard.js';
import type { AuthorityEntry, MailboxEntry } from './allocations.js';

/** A part is split further above this many bytes of entries (DynamoDB items: 400 KB). */
export const PART_TARGET_BYTES = 300_000;

/** sk prefix of authority items. */
export const AUTHORITY_SK = 'alloc#';

const encoder = new TextEncoder();

/** A region's figures for one plan-day. */
export interface RegionFigures {
  readonly spentMicros: number;
  readonly demandMicrosPerSec: number;
  /** False while the region has no demand measurement yet (its figure is 0 then). */
  readonly measured: boolean;
  readonly mailbox?: MailboxEntry;
}

/** One region's entries in a view. */
export interface RegionRecord {
  /** Newest write among its parts (the writer's clock). */
  readonly atMs: number;
  readonly plans: ReadonlyMap<string, RegionFigures>;
}

/** One home's authority entries in a view. */
export interface AuthorityRecord {
  readonly atMs: number;
  readonly tick: number;
  readonly epoch: number;
  readonly plans: ReadonlyMap<string, AuthorityEntry>;
}

/** Everything a shard's pk holds, as one tick reads it. */
export interface RegionSpendView {
  readonly regions: ReadonlyMap<string, RegionRecord>;
  readonly authorities: ReadonlyMap<string, AuthorityRecord>;
}

/** An empty view (before the first read). */
export const EMPTY_VIEW: RegionSpendView = { regions: new Map(), authorities: new Map() };

/** A raw item (DynamoDB document or the in-memory table). */
export type RawItem = Record<string, unknown>;

const finite = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);

function parseJson(raw: unknown): Record<string, unknown> | undefined {
  if (typeof raw !== 'string') return undefined;
  try {
    const v = JSON.parse(raw) as unknown;
    return v && typeof v === 'object' ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

function mailboxOf(raw: unknown, atMs: number): MailboxEntry | undefined {
  if (!Array.isArray(raw) || raw.length !== 7) return undefined;
  const [rel, want, seenG, seenX, ae, fence, home] = raw as unknown[];
  if (![rel, want, seenG, seenX, ae, fence].every((v) => finite(v) && v >= 0) || typeof home !== 'string')
    return undefined;
  return {
    spent: 0,
    rel: rel as number,
    want: want as number,
    seenG: seenG as number,
    seenX: seenX as number,
    ae: ae as number,
    fence: fence as number,
    home,
    atMs,
  };
}

/** A region item's plan-days (a malformed entry is skipped: it cannot be guessed at). */
export function parseRegionItem(item: RawItem): Map<string, RegionFigures> {
  const out = new Map<string, RegionFigures>();
  const plans = parseJson(item.plans);
  if (!plans) return out;
  const alloc = parseJson(item.alloc);
  const atMs = Number(item.atMs ?? 0);
  const unmeasured = new Set<string>();
  if (typeof item.um === 'string') {
    try {
      const list = JSON.parse(item.um) as unknown;
      if (Array.isArray(list)) for (const k of list) if (typeof k === 'string') unmeasured.add(k);
    } catch {
      // a malformed list: every figure reads as measured (today's meaning)
    }
  }
  for (const [key, v] of Object.entries(plans)) {
    if (!Array.isArray(v) || v.length !== 2) continue;
    const [spent, demand] = v as unknown[];
    if (!finite(spent) || !finite(demand) || spent < 0 || demand < 0) continue;
    const mailbox = mailboxOf(alloc?.[key], atMs);
    out.set(key, {
      spentMicros: spent,
      demandMicrosPerSec: demand,
      measured: !unmeasured.has(key),
      ...(mailbox ? { mailbox: { ...mailbox, spent } } : {}),
    });
  }
  return out;
}

/** An authority item's plan-days. */
export function parseAuthorityItem(item: RawItem): Map<string, AuthorityEntry> {
  const out = new Map<string, AuthorityEntry>();
  const regions = item.regions;
  const plans = parseJson(item.plans);
  if (!Array.isArray(regions) || !plans || !regions.every((r) => typeof r === 'string')) return out;
  for (const [key, v] of Object.entries(plans)) {
    if (!Array.isArray(v) || v.length !== 6 || !finite(v[0])) continue;
    const maps = (v as unknown[]).slice(1).map((arr) => {
      const m: Record<string, number> = {};
      if (!Array.isArray(arr) || arr.length !== regions.length) return undefined;
      for (let i = 0; i < regions.length; i++) {
        const n = arr[i];
        if (!finite(n)) return undefined;
        m[regions[i] as string] = n;
      }
      return m;
    });
    if (maps.some((m) => m === undefined)) continue;
    const [g, x, rb, ack, rs] = maps as Record<string, number>[];
    out.set(key, {
      fence: v[0] as number,
      g: g ?? {},
      x: x ?? {},
      rb: rb ?? {},
      ack: ack ?? {},
      rs: rs ?? {},
      writtenAtMs: Number(item.atMs ?? 0),
    });
  }
  return out;
}

/** The owner named by a sk (`<region>[#part]` or `alloc#<home>[#part]`). */
export function ownerOfSk(sk: string): { kind: 'region' | 'authority'; name: string } {
  if (sk.startsWith(AUTHORITY_SK))
    return { kind: 'authority', name: sk.slice(AUTHORITY_SK.length).split('#')[0] as string };
  return { kind: 'region', name: sk.split('#')[0] as string };
}

/**
 * Merges a pk's items into one view: per owner and key, the entry of the part with the highest
 * tick (a part count change or a part not replicated yet reads as a lagging entry).
 */
export function viewOf(items: readonly RawItem[]): RegionSpendView {
  const regions = new Map<
    string,
    { atMs: number; plans: Map<string, RegionFigures>; ticks: Map<string, number> }
  >();
  const authorities = new Map<
    string,
    {
      atMs: number;
      tick: number;
      epoch: number;
      plans: Map<string, AuthorityEntry>;
      ticks: Map<string, number>;
    }
  >();
  for (const item of items) {
    const owner = ownerOfSk(String(item.sk));
    const tick = Number(item.tick ?? 0);
    const atMs = Number(item.atMs ?? 0);
    if (owner.kind === 'region') {
      let r = regions.get(owner.name);
      if (!r) {
        r = { atMs, plans: new Map(), ticks: new Map() };
        regions.set(owner.name, r);
      }
      r.atMs = Math.max(r.atMs, atMs);
      for (const [key, figures] of parseRegionItem(item)) {
        if ((r.ticks.get(key) ?? Number.NEGATIVE_INFINITY) >= tick) continue;
        r.ticks.set(key, tick);
        r.plans.set(key, figures);
      }
    } else {
      let a = authorities.get(owner.name);
      if (!a) {
        a = { atMs, tick, epoch: Number(item.epoch ?? 0), plans: new Map(), ticks: new Map() };
        authorities.set(owner.name, a);
      }
      if (tick > a.tick) {
        a.tick = tick;
        a.epoch = Number(item.epoch ?? 0);
      }
      a.atMs = Math.max(a.atMs, atMs);
      for (const [key, entry] of parseAuthorityItem(item)) {
        if ((a.ticks.get(key) ?? Number.NEGATIVE_INFINITY) >= tick) continue;
        a.ticks.set(key, tick);
        a.plans.set(key, entry);
      }
    }
  }
  return {
    regions: new Map([...regions].map(([k, v]) => [k, { atMs: v.atMs, plans: v.plans }])),
    authorities: new Map(
      [...authorities].map(([k, v]) => [k, { atMs: v.atMs, tick: v.tick, epoch: v.epoch, plans: v.plans }]),
    ),
  };
}

/** The part of a plan-day key among `parts` (a power of two). */
export function partOf(key: string, parts: number): number {
  return parts <= 1 ? 0 : fnv1a32(encoder.encode(key)) % parts;
}

/**
 * Splits entries (key, bytes of its JSON) into parts: the smallest power of two such that every
 * part stays within `targetBytes`. Returns the entries' indexes per part.
 */
export function splitParts(
  entries: readonly (readonly [key: string, bytes: number])[],
  targetBytes: number = PART_TARGET_BYTES,
): number[][] {
  let total = 0;
  for (const [, bytes] of entries) total += bytes + 1;
  let parts = 1;
  while (parts < total / targetBytes) parts *= 2;
  for (;;) {
    const out: number[][] = Array.from({ length: parts }, () => []);
    const sizes = new Array<number>(parts).fill(0);
    entries.forEach(([key, bytes], i) => {
      const p = partOf(key, parts);
      (out[p] as number[]).push(i);
      sizes[p] = (sizes[p] as number) + bytes + 1;
    });
    // An unlucky hash can overfill one part: split further (a part holds at least one entry).
    if (sizes.every((b, i) => b <= targetBytes || (out[i] as number[]).length <= 1) || parts >= 1 << 16)
      return out;
    parts *= 2;
  }
}

/** The sk of an owner's part (no suffix with one part: one region's item is as before parts). */
export function partSk(base: string, part: number, parts: number): string {
  return parts === 1 ? base : `${base}#${part}`;
}

/** Where the table's items live (DynamoDB: `dynamoRegionSpendStore`; the simulator: in memory). */
export interface RegionSpendStore {
  /** Every item of a pk, read consistently from this region's replica. */
  query(pk: string): Promise<RawItem[]>;
  /**
   * Writes an item unless the stored one has a tick ≥ the item's or (with `epoch`) a higher
   * epoch. Resolves false when refused.
   */
  put(item: RawItem, options?: { readonly epoch?: number }): Promise<boolean>;
  delete(pk: string, sk: string): Promise<void>;
}
