/**
 * Spend events on the spend stream (JSON, one per Kinesis user record, schema version 1):
 *
 * - `bid`  — a bid went out; `bidPriceMicros` is the in-flight amount the guard reserved;
 * - `win`  — the exchange's win / billing notice with the clearing price, either as integer
 *            `clearingPriceMicros` per impression or as `auctionPrice`, the string the exchange
 *            substituted for the OpenRTB `${AUCTION_PRICE}` macro (CPM in account currency);
 * - `loss` — a loss notice (releases the in-flight amount early).
 *
 * Notices echo `bidAt` and `bidPriceMicros` (the ad server puts them in the notice URL it hands
 * the exchange), so a notice is self-contained: it names the day the spend belongs to (the
 * bid's local day) and the in-flight slot to release, whatever order the stream delivers in.
 *
 * Decoding is pure; every rejection is a {@link SpendRecordError} (a MalformedRecordError) with
 * a stable reason code and a message saying what was wrong and what to do.
 */
import { MalformedRecordError } from '../quarantine/quarantine.js';

/** Current schema version. */
export const SPEND_EVENT_VERSION = 1;

interface BaseEvent {
  readonly v: 1;
  /** Unique per campaign: the OpenRTB bid id the ad server generated. */
  readonly bidId: string;
  readonly campaignId: string;
  /** Experiment arm / line, when the campaign has arm plans. */
  readonly armId?: string;
  /** When the bid was made (epoch ms); decides the budget day and the in-flight slot. */
  readonly bidAt: number;
  /** The bid price = the in-flight amount reserved, integer micros per impression. */
  readonly bidPriceMicros: number;
}

/** A bid went out. */
export interface BidEvent extends BaseEvent {
  readonly type: 'bid';
}

/** Win / billing notice. */
export interface WinEvent extends BaseEvent {
  readonly type: 'win';
  /** When the notice was received (epoch ms). */
  readonly at: number;
  /** Clearing price, integer micros per impression (after `${AUCTION_PRICE}` conversion). */
  readonly clearingPriceMicros: number;
}

/** Loss notice. */
export interface LossEvent extends BaseEvent {
  readonly type: 'loss';
  readonly at: number;
}

/** Any decoded spend event. */
export type SpendEvent = BidEvent | WinEvent | LossEvent;

/** Base class of every spend-record rejection (quarantined with its reason). */
export class SpendRecordError extends MalformedRecordError {
  override readonly name: string = 'SpendRecordError';
}

/** The record is not a valid spend event. */
export class SpendSchemaError extends SpendRecordError {
  override readonly name = 'SpendSchemaError';
}

/** A price is negative, NaN, not an integer or absurd. */
export class InvalidPriceError extends SpendRecordError {
  override readonly name = 'InvalidPriceError';
}

/** `${AUCTION_PRICE}` arrived unsubstituted (or not as a number). */
export class AuctionPriceMacroError extends SpendRecordError {
  override readonly name = 'AuctionPriceMacroError';
}

/** The event names a campaign the budgets table does not know. */
export class UnknownCampaignError extends SpendRecordError {
  override readonly name = 'UnknownCampaignError';
}

/** A notice that cannot belong to a real bid (e.g. it claims the bid came after the notice). */
export class UnknownBidError extends SpendRecordError {
  override readonly name = 'UnknownBidError';
}

/** A time outside the window the consumer books spend for (in the future, or too old). */
export class SpendTimeWindowError extends SpendRecordError {
  override readonly name = 'SpendTimeWindowError';
}

/** Limits of decoding. */
export interface SpendLimits {
  /**
   * Largest believable price per impression, micros. Above it the record is quarantined as
   * absurd (a CPM/CPI unit mix-up, an encrypted price read as a number…).
   * @default 1_000_000 ($1,000 CPM)
   */
  readonly maxPriceMicros: number;
  /**
   * Tolerated clock skew between ad servers, exchanges and this consumer, ms: a notice may name a
   * bid up to this much after itself, and no time may be further than this ahead of the
   * consumer's clock. @default 120_000 (2 minutes)
   */
  readonly clockSkewMs: number;
  /**
   * Oldest bid the consumer books automatically, ms before its clock. Covers late billing
   * notices (exchanges send some hours late) and replays of dead letters and on-failure batches
   * within the stream's retention; anything older is quarantined for a human to look at (a
   * producer clock or unit bug, or a replay that should go through `budgets reconcile`).
   * @default 604_800_000 (7 days)
   */
  readonly maxBidAgeMs: number;
}

/** Default {@link SpendLimits}. */
export const defaultSpendLimits: SpendLimits = {
  maxPriceMicros: 1_000_000,
  clockSkewMs: 120_000,
  maxBidAgeMs: 7 * 86_400_000,
};

/** A value as it may appear in a reason: bounded, so a 900 KB field cannot blow up a dead letter. */
export function preview(value: unknown, max = 64): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length <= max ? text : `${text.slice(0, max)}… (${text.length} chars)`;
}

const ID = /^[A-Za-z0-9_.-]{1,64}$/;
const BID_ID = /^[\x21-\x7e]{1,128}$/;

function str(o: Record<string, unknown>, field: string, re: RegExp): string {
  const v = o[field];
  if (typeof v !== 'string' || !re.test(v)) {
    throw new SpendSchemaError(
      'spend.invalid-field',
      `Field ${field}=${preview(v)} is invalid: expected a string matching ${re}. Fix the producer.`,
    );
  }
  return v;
}

function time(o: Record<string, unknown>, field: string): number {
  const v = o[field];
  // 2001-09-09 … 2286: epoch ms, not seconds.
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1e12 || v > 1e13) {
    throw new SpendSchemaError(
      'spend.invalid-time',
      `Field ${field}=${preview(v)} is not an epoch-milliseconds timestamp. Fix the producer (seconds × 1000?).`,
    );
  }
  return v;
}

function price(o: Record<string, unknown>, field: string, limits: SpendLimits): number {
  const v = o[field];
  if (typeof v !== 'number' || Number.isNaN(v)) {
    throw new InvalidPriceError('spend.price-nan', `Field ${field}=${preview(v)} is not a number.`);
  }
  return checkMicros(field, v, limits);
}

function checkMicros(field: string, v: number, limits: SpendLimits): number {
  if (!Number.isFinite(v) || !Number.isInteger(v)) {
    throw new InvalidPriceError(
      'spend.price-not-integer',
      `${field}=${v} must be integer micros ($1 = 1000000).`,
    );
  }
  if (v < 0) throw new InvalidPriceError('spend.price-negative', `${field}=${v} is negative.`);
  if (v > limits.maxPriceMicros) {
    throw new InvalidPriceError(
      'spend.price-absurd',
      `${field}=${v} micros per impression exceeds the ${limits.maxPriceMicros} limit: a unit mix-up (CPM vs per ` +
        'impression, dollars vs micros)? Fix the producer or raise maxPriceMicros.',
    );
  }
  return v;
}

/**
 * Converts the value an exchange substituted for `${AUCTION_PRICE}` (a decimal CPM in account
 * currency, e.g. "1.25") to integer micros per impression (CPM × 10^6 / 1000), rounding half up.
 * Parsed as a decimal string, not a float, so "0.0015" converts exactly.
 */
export function auctionPriceToMicros(raw: string, limits: SpendLimits = defaultSpendLimits): number {
  if (raw.includes('${') || raw.includes('AUCTION_PRICE')) {
    throw new AuctionPriceMacroError(
      'spend.unsubstituted-macro',
      `auctionPrice ${preview(raw)} is the unsubstituted \${AUCTION_PRICE} macro: the exchange did not fill it in.`,
    );
  }
  const m = /^\s*(\d{1,9})(?:\.(\d{1,12}))?\s*$/.exec(raw);
  if (!m) {
    throw new AuctionPriceMacroError(
      'spend.auction-price-format',
      `auctionPrice ${preview(raw)} is not a decimal CPM such as "1.25" (encrypted prices must be decrypted by the ad server).`,
    );
  }
  const whole = Number(m[1]);
  const frac = (m[2] ?? '').padEnd(12, '0');
  // micros per impression = CPM × 1000: whole × 1000 + first 3 fraction digits, round on the 4th.
  const micros = whole * 1000 + Number(frac.slice(0, 3)) + (Number(frac[3]) >= 5 ? 1 : 0);
  return checkMicros('auctionPrice', micros, limits);
}

/** Decodes and validates one spend record. Throws a {@link SpendRecordError} subclass. */
export function decodeSpendEvent(data: Uint8Array, limits: SpendLimits = defaultSpendLimits): SpendEvent {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(data).toString('utf8'));
  } catch (error) {
    throw new SpendSchemaError('spend.not-json', 'Record is not JSON: spend events are UTF-8 JSON objects.', {
      cause: error,
    });
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new SpendSchemaError('spend.not-object', 'Record is not a JSON object.');
  }
  const o = parsed as Record<string, unknown>;
  if (o.v !== SPEND_EVENT_VERSION) {
    throw new SpendSchemaError(
      'spend.unsupported-version',
      `Schema version v=${preview(o.v)} is not supported: this consumer reads v=${SPEND_EVENT_VERSION}.`,
    );
  }
  const type = o.type;
  if (type !== 'bid' && type !== 'win' && type !== 'loss') {
    throw new SpendSchemaError('spend.unknown-type', `type=${preview(type)} must be "bid", "win" or "loss".`);
  }
  const base = {
    v: 1 as const,
    bidId: str(o, 'bidId', BID_ID),
    campaignId: str(o, 'campaignId', ID),
    ...(o.armId === undefined ? {} : { armId: str(o, 'armId', ID) }),
    bidAt: time(o, 'bidAt'),
    bidPriceMicros: price(o, 'bidPriceMicros', limits),
  };
  if (type === 'bid') return { type, ...base };
  const at = time(o, 'at');
  if (base.bidAt > at + limits.clockSkewMs) {
    throw new UnknownBidError(
      'spend.notice-before-bid',
      `Notice at ${at} claims bid ${base.bidId} was made at ${base.bidAt}, after the notice: no such bid can exist.`,
    );
  }
  if (type === 'loss') return { type, ...base, at };
  let clearing: number;
  if (o.clearingPriceMicros !== undefined && o.auctionPrice !== undefined) {
    throw new SpendSchemaError(
      'spend.ambiguous-price',
      'Give clearingPriceMicros or auctionPrice, not both.',
    );
  }
  if (o.clearingPriceMicros !== undefined) clearing = price(o, 'clearingPriceMicros', limits);
  else if (typeof o.auctionPrice === 'string') clearing = auctionPriceToMicros(o.auctionPrice, limits);
  else if (typeof o.auctionPrice === 'number') {
    throw new AuctionPriceMacroError(
      'spend.auction-price-format',
      'auctionPrice must be the string the exchange substituted (decimal CPM), not a JSON number.',
    );
  } else {
    throw new SpendSchemaError(
      'spend.missing-price',
      'A win notice needs clearingPriceMicros or auctionPrice.',
    );
  }
  if (clearing > base.bidPriceMicros) {
    // Second-price auctions never clear above the bid: a unit or macro error, and real money —
    // quarantined for a human, never dropped (the overshoot bound assumes clearing ≤ bid).
    throw new InvalidPriceError(
      'spend.clearing-above-bid',
      `Clearing price ${clearing} micros exceeds the bid price ${base.bidPriceMicros} for bid ${base.bidId}: ` +
        'check the exchange price units; replay the record from the dead-letter store once resolved.',
    );
  }
  return { type, ...base, at, clearingPriceMicros: clearing };
}

const iso = (ms: number) => new Date(ms).toISOString();

/**
 * Checks an event's times against the consumer's clock (`now`): the bid no more than
 * `maxBidAgeMs` in the past and no more than `clockSkewMs` in the future, a notice not in the
 * future beyond the skew. Outside that window spend would be booked to a day that has not
 * started, or decades ago, or kept in the ledger for centuries: the record is quarantined
 * ({@link SpendTimeWindowError}) with what to check. Pure: the caller passes its clock's time.
 */
export function checkSpendTimes(
  event: SpendEvent,
  now: number,
  limits: SpendLimits = defaultSpendLimits,
): void {
  const skew = limits.clockSkewMs;
  if (event.bidAt > now + skew) {
    throw new SpendTimeWindowError(
      'spend.bid-in-future',
      `bidAt ${iso(event.bidAt)} of bid ${event.bidId} is ${Math.round((event.bidAt - now) / 1000)} s ahead of ` +
        `this consumer's clock (${iso(now)}; tolerated skew ${skew / 1000} s): check the ad server's clock ` +
        '(NTP) and that bidAt is epoch milliseconds, then replay the dead letter.',
    );
  }
  if (event.type !== 'bid' && event.at > now + skew) {
    throw new SpendTimeWindowError(
      'spend.notice-in-future',
      `Notice time at=${iso(event.at)} of bid ${event.bidId} is ${Math.round((event.at - now) / 1000)} s ahead of ` +
        `this consumer's clock (${iso(now)}; tolerated skew ${skew / 1000} s): check the clock of the host ` +
        'that stamps notices, then replay the dead letter.',
    );
  }
  if (now - event.bidAt > limits.maxBidAgeMs) {
    throw new SpendTimeWindowError(
      'spend.bid-too-old',
      `bidAt ${iso(event.bidAt)} of bid ${event.bidId} is ${((now - event.bidAt) / 86_400_000).toFixed(1)} days ` +
        `before this consumer's clock (${iso(now)}); spend older than ${limits.maxBidAgeMs / 86_400_000} days is ` +
        "not booked automatically: check the producer's clock and units; a genuine old notice is booked by " +
        'replaying the dead letter with a larger SPEND_MAX_BID_AGE_MS.',
    );
  }
}

/** Encodes an event (what producers put on the stream). */
export function encodeSpendEvent(event: SpendEvent): Buffer {
  return Buffer.from(JSON.stringify(event));
}
