/**
 * Value encodings of the published campaign hash, contract v2 (docs/pacing.md has the same with a
 * worked example). Pure functions, shared by the publisher and the reader, so the two cannot
 * disagree; plain decimal text, so a reader in any language parses it with split and atoi/atof.
 *
 * Hash `pp:1:{pp:<shard>}:c:<campaignId>`:
 *
 * | field          | value                                                                          |
 * | -------------- | ------------------------------------------------------------------------------ |
 * | `v`            | `2` (contract version)                                                          |
 * | `t`            | tick id of the publish that last wrote this hash (⌊epochMs / tickMs⌋)           |
 * | `at`           | epoch ms of that write (publisher's clock)                                      |
 * | `f`            | fence `g.o.e`                                                                   |
 * | `by`           | publisher id (`<instance id>/<process nonce>`)                                  |
 * | `plans`        | plan ids present, comma-separated: `account`, `campaign`, `arm:<armId>`        |
 * | `p:<planId>`   | `throttle,bidMultiplier,budgetMicros,mode,day,dayStartMs,dayEndMs`              |
 * | `e:<planId>`   | E(t): knots `atMs,micros` separated by `;`, the first absolute, the rest deltas |
 *
 * v2 (this version): a hash is rewritten only when something in it changes beyond the deadband,
 * or at least every `rp` ms; the freshness of every campaign of the shard is the shard's last
 * completed publish, fields `pt` / `pat` / `rp` of `pp:1:{pp:<shard>}:claim`
 * ({@link decodeShardPublish}, {@link effectivePublish}).
 */
import type { DayWindow } from '../budget/time-zone.js';
import { errorKind } from '../errors.js';
import { writeField } from './decimal.js';
import { type Fence, parseFence } from './fence.js';
import { isPacingMode, type PacingMode } from './modes.js';
import type { CurvePoints, PlanPacingParams } from './types.js';

/** Contract version written in field `v`. */
export const PACING_CONTRACT_VERSION = 2;

/** Thrown when a controller's output cannot be published (e.g. a NaN throttle). */
export class InvalidPacingParamsError extends errorKind(
  'InvalidPacingParamsError',
  'pacing.invalid-params',
) {}

/** Formats a factor with at most 6 decimals (plain decimal, no exponent). */
function factor(x: number): string {
  return String(Math.round(x * 1e6) / 1e6);
}

/** Curves already validated (controllers return the same object while a curve is unchanged). */
const validCurves = new WeakSet<CurvePoints>();
/** Day strings already validated (a handful are live at any time). */
const validDays = new Set<string>();

/** Validates what the publisher is about to write; throws {@link InvalidPacingParamsError}. */
export function assertPublishable(p: PlanPacingParams): void {
  // Hot path (every plan, every tick): no closure is allocated unless something is wrong.
  if (
    p.throttle >= 0 &&
    p.throttle <= 1 &&
    Number.isFinite(p.bidMultiplier) &&
    p.bidMultiplier > 0 &&
    p.bidMultiplier <= 100 &&
    Number.isSafeInteger(p.budgetMicros) &&
    p.budgetMicros >= 0 &&
    isPacingMode(p.mode) &&
    validDays.has(p.day) &&
    validCurves.has(p.curve)
  ) {
    return;
  }
  const bad = (what: string) => {
    throw new InvalidPacingParamsError(`plan ${p.planId}: ${what}`);
  };
  if (!(p.throttle >= 0 && p.throttle <= 1)) bad(`throttle ${p.throttle} is outside [0, 1]`);
  if (!(Number.isFinite(p.bidMultiplier) && p.bidMultiplier > 0 && p.bidMultiplier <= 100))
    bad(`bid multiplier ${p.bidMultiplier} is outside (0, 100]`);
  if (!Number.isSafeInteger(p.budgetMicros) || p.budgetMicros < 0) bad(`budget ${p.budgetMicros} micros`);
  if (!isPacingMode(p.mode)) bad(`mode ${String(p.mode)} is not a pacing mode this version knows`);
  if (!validDays.has(p.day)) {
    if (!/^\d{4}-\d{2}-\d{2}$/.test(p.day)) bad(`day ${p.day}`);
    if (validDays.size > 1_000) validDays.clear();
    validDays.add(p.day);
  }
  if (validCurves.has(p.curve)) return;
  const { atMs, micros } = p.curve;
  if (atMs.length === 0 || atMs.length !== micros.length) bad('curve knots and values differ in length');
  for (let i = 0; i < atMs.length; i++) {
    if (!Number.isSafeInteger(atMs[i]) || !Number.isSafeInteger(micros[i]))
      bad(`curve knot ${i} is not integral`);
    if (i > 0 && !((atMs[i] as number) > (atMs[i - 1] as number))) bad('curve instants must increase');
    if (i > 0 && (micros[i] as number) < (micros[i - 1] as number)) bad('curve values must not decrease');
  }
  validCurves.add(p.curve);
}

/** `p:<planId>` value. */
export function encodePlanParams(p: PlanPacingParams, day: DayWindow): string {
  return `${factor(p.throttle)},${factor(p.bidMultiplier)},${p.budgetMicros},${p.mode},${p.day},${day.startMs},${day.endMs}`;
}

/**
 * `e:<planId>` value: first knot absolute, then deltas. Written into one buffer (shared/pacing/
 * decimal.ts): a takeover's publish encodes every plan's curve, 150,000 at 100,000 campaigns.
 */
export function encodeCurve(curve: CurvePoints): string {
  const n = curve.atMs.length;
  // Each knot: `;`, two safe integers of at most 17 characters each and `,`.
  if (curveBuffer.length < 36 * n + 1) curveBuffer = Buffer.alloc(36 * n + 1);
  const b = curveBuffer;
  let p = 0;
  let t = 0;
  let v = 0;
  for (let i = 0; i < n; i++) {
    const at = curve.atMs[i] as number;
    const m = curve.micros[i] as number;
    p = writeField(b, writeField(b, p, 0x3b, at - t), 0x2c, m - v);
    t = at;
    v = m;
  }
  // The text starts after the first knot's `;`. p < 0: a value that is not a safe integer.
  return p < 0 ? encodeCurveText(curve) : b.toString('latin1', Math.min(1, p), p);
}

let curveBuffer = Buffer.alloc(36 * 32);

/** {@link encodeCurve} from template strings: a value that is not a safe integer shows as it is. */
function encodeCurveText(curve: CurvePoints): string {
  const parts: string[] = [];
  let t = 0;
  let v = 0;
  for (let i = 0; i < curve.atMs.length; i++) {
    const at = curve.atMs[i] as number;
    const m = curve.micros[i] as number;
    parts.push(`${at - t},${m - v}`);
    t = at;
    v = m;
  }
  return parts.join(';');
}

/** Parses {@link encodeCurve}'s output; undefined when malformed. */
export function decodeCurve(raw: string): CurvePoints | undefined {
  const atMs: number[] = [];
  const micros: number[] = [];
  let t = 0;
  let v = 0;
  for (const knot of raw.split(';')) {
    const comma = knot.indexOf(',');
    if (comma <= 0) return undefined;
    const dt = Number(knot.slice(0, comma));
    const dv = Number(knot.slice(comma + 1));
    if (!Number.isSafeInteger(dt) || !Number.isSafeInteger(dv)) return undefined;
    t += dt;
    v += dv;
    if (atMs.length > 0 && (dt <= 0 || dv < 0)) return undefined;
    atMs.push(t);
    micros.push(v);
  }
  return atMs.length > 0 ? { atMs, micros } : undefined;
}

/** One plan's parameters as a reader gets them back, with the day window. */
export interface PublishedPlan extends PlanPacingParams {
  readonly dayWindow: DayWindow;
}

/** Everything published for a campaign (one HGETALL). */
export interface PublishedCampaign {
  readonly version: number;
  readonly tick: number;
  readonly publishedAtMs: number;
  readonly fence: Fence;
  readonly publisher: string;
  /** By plan id: `account`, `campaign`, `arm:<armId>`. */
  readonly plans: ReadonlyMap<string, PublishedPlan>;
}

/** Why a hash could not be decoded. */
export class PacingDecodeError extends errorKind('PacingDecodeError', 'pacing.decode') {}

/** Day strings already checked by a decode (a handful are live at any time). */
const decodedDays = new Set<string>();

/** `YYYY-MM-DD` (a reader decodes every plan of every campaign each tick: the test is remembered). */
function isDay(day: string): boolean {
  if (decodedDays.has(day)) return true;
  if (!/^\d{4}-\d{2}-\d{2}$/.test(day)) return false;
  if (decodedDays.size > 1_000) decodedDays.clear();
  decodedDays.add(day);
  return true;
}

/** The `p:` and `e:` field names of a plan id (a few ids — account, campaign, arms — recur). */
const planFieldNames = new Map<string, readonly [string, string]>();

/**
 * The `p:` and `e:` field names of a plan id, one string each per id (the publisher's whole
 * rewrite at a takeover names 300,000-odd fields; the reader's decode looks them up).
 */
export function fieldNamesOf(planId: string): readonly [string, string] {
  let names = planFieldNames.get(planId);
  if (names === undefined) {
    if (planFieldNames.size > 10_000) planFieldNames.clear();
    names = [`p:${planId}`, `e:${planId}`];
    planFieldNames.set(planId, names);
  }
  return names;
}

function decodePlan(
  planId: string,
  params: string | undefined,
  curveRaw: string | undefined,
  curveOf: (raw: string) => CurvePoints | undefined,
): PublishedPlan {
  if (params === undefined) throw new PacingDecodeError(`plan ${planId}: no p:${planId} field`);
  if (curveRaw === undefined) throw new PacingDecodeError(`plan ${planId}: no e:${planId} field`);
  const f = params.split(',');
  if (f.length !== 7) throw new PacingDecodeError(`plan ${planId}: p: field has ${f.length} parts, not 7`);
  const throttle = Number(f[0]);
  const bidMultiplier = Number(f[1]);
  const budgetMicros = Number(f[2]);
  const mode = f[3] as PacingMode;
  const day = f[4] as string;
  const startMs = Number(f[5]);
  const endMs = Number(f[6]);
  const curve = curveOf(curveRaw);
  if (
    !(throttle >= 0 && throttle <= 1) ||
    !(bidMultiplier > 0 && Number.isFinite(bidMultiplier)) ||
    !Number.isSafeInteger(budgetMicros) ||
    !isPacingMode(mode) ||
    !isDay(day) ||
    !Number.isSafeInteger(startMs) ||
    !Number.isSafeInteger(endMs) ||
    !curve
  ) {
    if (!isPacingMode(mode) && /^[a-z][a-z0-9-]*$/.test(mode)) {
      // A well-formed mode of another version: say so (the campaign's plans get the fail-safe).
      throw new PacingDecodeError(
        `plan ${planId}: pacing mode ${JSON.stringify(mode)} is not known to this version: deploy readers that know a mode before any plan uses it (docs/pacing.md, "Adding a pacing mode")`,
      );
    }
    throw new PacingDecodeError(`plan ${planId}: malformed parameters ${JSON.stringify(params)}`);
  }
  return {
    planId,
    throttle,
    bidMultiplier,
    budgetMicros,
    mode,
    day,
    curve,
    dayWindow: { day, startMs, endMs },
  };
}

/**
 * Decodes a campaign hash (HGETALL reply). Undefined for an empty hash (never published);
 * throws {@link PacingDecodeError} for a malformed one (counted by the reader, never guessed at).
 * `curveOf` decodes an `e:` value ({@link decodeCurve} by default): a reader passes a cache by
 * text, because a curve changes a few times a day while its hash is rewritten most ticks.
 */
export function decodeCampaignHash(
  hash: Readonly<Record<string, string>>,
  curveOf: (raw: string) => CurvePoints | undefined = decodeCurve,
): PublishedCampaign | undefined {
  if (hash.v === undefined) return undefined;
  const version = Number(hash.v);
  if (version !== PACING_CONTRACT_VERSION) {
    throw new PacingDecodeError(`contract version ${hash.v} is not ${PACING_CONTRACT_VERSION}`);
  }
  const tick = Number(hash.t);
  const publishedAtMs = Number(hash.at);
  const fence = parseFence(hash.f);
  if (!Number.isSafeInteger(tick) || !Number.isSafeInteger(publishedAtMs) || !fence) {
    throw new PacingDecodeError(`malformed header t=${hash.t} at=${hash.at} f=${hash.f}`);
  }
  const plans = new Map<string, PublishedPlan>();
  for (const planId of (hash.plans ?? '').split(',')) {
    if (planId === '') continue;
    const [p, e] = fieldNamesOf(planId);
    plans.set(planId, decodePlan(planId, hash[p], hash[e], curveOf));
  }
  return { version, tick, publishedAtMs, fence, publisher: hash.by ?? '', plans };
}

/** The shard's last completed publish, from its claim hash (contract v2). */
export interface ShardPublish {
  /** Tick of the last publish whose every batch landed (`pt`). */
  readonly tick: number;
  /** Its published-at, epoch ms, publisher's clock (`pat`). */
  readonly publishedAtMs: number;
  /** Every paced campaign's hash is rewritten at least this often, ms (`rp`). */
  readonly republishMs: number;
}

/**
 * Decodes `pt`, `pat`, `rp` of a shard's claim hash (HGETALL or HMGET as a record); undefined
 * when the shard never completed a v2 publish or the fields are malformed (readers then fall back
 * to each campaign hash's own `at`, which is conservative).
 */
export function decodeShardPublish(
  claim: Readonly<Record<string, string | null | undefined>>,
): ShardPublish | undefined {
  const tick = Number(claim.pt);
  const publishedAtMs = Number(claim.pat);
  const republishMs = Number(claim.rp);
  if (
    claim.pt == null ||
    claim.pat == null ||
    claim.rp == null ||
    !Number.isSafeInteger(tick) ||
    !Number.isSafeInteger(publishedAtMs) ||
    !Number.isSafeInteger(republishMs) ||
    republishMs < 0
  ) {
    return undefined;
  }
  return { tick, publishedAtMs, republishMs };
}

/**
 * A campaign's parameters with the freshness readers must use (contract v2): the shard's last
 * completed publish vouches for every campaign hash the publisher still rewrites, i.e. one written
 * within `rp` of it; a hash left behind (a campaign no longer paced: paused, deleted, moved) ages
 * from its own `at` + `rp`. So `publishedAtMs` = min(shard `pat`, campaign `at` + `rp`), never
 * earlier than the campaign's own `at`; without a shard publish, the campaign's own `at`.
 */
export function effectivePublish(
  campaign: PublishedCampaign,
  shard: ShardPublish | undefined,
): PublishedCampaign {
  if (!shard) return campaign;
  const vouched = Math.min(shard.publishedAtMs, campaign.publishedAtMs + shard.republishMs);
  if (vouched <= campaign.publishedAtMs) return campaign;
  return {
    ...campaign,
    publishedAtMs: vouched,
    tick: vouched === shard.publishedAtMs ? shard.tick : campaign.tick,
  };
}
