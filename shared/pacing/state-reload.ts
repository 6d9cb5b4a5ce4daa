/**
 * The takeover's reads of what the previous publisher stored: controller state (`st`) and
 * forecasts (`fc`) of the shard's plans, by field, in parts — an `HMGET` of each hash per part of
 * the tick's plan list, all written at once on a raw connection of their own and folded as they
 * arrive (shared/redis/resp/hash-reader.ts), so the pacer steps a part as soon as its spend and its
 * stored state are in, while Redis serves the rest. No read of a whole hash: a shard's state hash
 * holds 150,000 fields at 100,000 campaigns, and reading it whole (HSCAN pages through the client)
 * made the takeover tick wait for all of it before stepping a single plan.
 *
 * Fields of plans that no longer exist (deleted campaigns and arms) are found apart, and only when
 * a hash holds more fields than the reads found ({@link StateReloader.counts}): a sweep of the
 * hash's field names ({@link StateReloader.unknownFields}), which the pacer runs after its publish.
 *
 * {@link TakeoverReloads} is the pacer's side: which plans' state to read, in which parts, and
 * how what arrives is adopted into its plan memories.
 */
import type { CampaignBudgets, ResolvedPlan } from '../budget/model.js';
import type { RedisClient } from '../redis/connect.js';
import { bulk } from '../redis/resp/connection.js';
import { type HashVisitor, RawHashReader } from '../redis/resp/hash-reader.js';
import type { Clock } from '../time/clock.js';
import { planField, type ShardKeys } from './keys.js';
import { campaignFields, type PlanBook, type PlanList, plansOfCampaign } from './plan-list.js';

/** The stored texts of one part's plans, aligned with its fields (undefined: none stored). */
export interface StoredTexts {
  readonly state: (string | undefined)[];
  readonly forecast: (string | undefined)[];
}

/** Options of {@link StateReloader}. */
export interface StateReloaderOptions {
  readonly redis: RedisClient;
  readonly keys: Pick<ShardKeys, 'state' | 'forecast'>;
  /** Longest silence of the node while replies are due, ms (RawHashReader's). @default 1000 */
  readonly timeoutMs?: number;
}

/** One HMGET reply as the texts of its fields (the fields are the command's, by index). */
class TextsVisitor implements HashVisitor<(string | undefined)[]> {
  private out: (string | undefined)[] = [];

  constructor(private readonly fieldsOf: (index: number) => readonly string[]) {}

  begin(_exists: boolean, index: number): void {
    this.out = new Array(this.fieldsOf(index).length);
  }

  field(): void {
    // HMGET replies come through `item`.
  }

  item(i: number, buf: Buffer, start: number, end: number): void {
    // The same text ioredis would give (UTF-8); the encodings are ASCII.
    if (start >= 0) this.out[i] = buf.toString('utf8', start, end);
  }

  end(): (string | undefined)[] {
    return this.out;
  }

  fromObject(hash: Readonly<Record<string, string>>, index: number): (string | undefined)[] {
    return this.fieldsOf(index).map((f) => hash[f]);
  }
}

/** Reads a shard's stored state and forecasts by plan field (see the module comment). */
export class StateReloader {
  private readonly reader: RawHashReader;

  constructor(private readonly options: StateReloaderOptions) {
    this.reader = new RawHashReader({
      client: options.redis,
      ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
    });
  }

  /**
   * The stored texts of `fields`, in parts of `partSize` fields (part k: fields [k·size, …)), in
   * order: every command is written at once, and part k resolves as soon as its two replies are in.
   * A failed read (connection lost, the node silent too long) rejects every part not yet resolved.
   */
  read(fields: readonly string[], partSize: number): Promise<StoredTexts>[] {
    const size = Math.max(1, Math.floor(partSize));
    const count = Math.ceil(fields.length / size);
    const { state, forecast } = this.options.keys;
    // Command 2k reads part k from `st`, 2k + 1 from `fc` (same slot: one node, in order).
    const keys: string[] = [];
    const partFields: (readonly string[])[] = [];
    for (let k = 0; k < count; k++) {
      const f = fields.slice(k * size, (k + 1) * size);
      partFields.push(f, f);
      keys.push(state, forecast);
    }
    return this.hmget(keys, (i) => partFields[i] as readonly string[], 2).map((part) => {
      const texts = part.then(([s, f]) => ({
        state: s as (string | undefined)[],
        forecast: f as (string | undefined)[],
      }));
      texts.catch(() => {});
      return texts;
    });
  }

  /**
   * `HMGET key fields…` for every key (its fields by index), in parts of `partSize` keys, in order:
   * the takeover reads what its predecessor published in each campaign hash this way (a field
   * that holds what this publish computes is not written again). Rejections as {@link read}'s.
   */
  hmget(
    keys: readonly string[],
    fieldsOf: (index: number) => readonly string[],
    partSize: number,
  ): Promise<(string | undefined)[][]>[] {
    const args = new Map<readonly string[], string>();
    const command = (key: string, index: number) => {
      const fields = fieldsOf(index);
      let tail = args.get(fields);
      if (tail === undefined) {
        tail = fields.map(bulk).join('');
        args.set(fields, tail);
      }
      return `*${fields.length + 2}\r\n$5\r\nHMGET\r\n${bulk(key)}${tail}`;
    };
    const parts = this.reader.readParts(keys, new TextsVisitor(fieldsOf), partSize, command);
    // Handled here too: a caller that stops at a failed part never awaits the later ones.
    for (const part of parts) part.catch(() => {});
    return parts;
  }

  /** How many fields each hash holds (HLEN), to tell whether fields of unknown plans remain. */
  async counts(): Promise<{ readonly state: number; readonly forecast: number }> {
    const { state, forecast } = this.options.keys;
    const [s, f] = await Promise.all([this.options.redis.hlen(state), this.options.redis.hlen(forecast)]);
    return { state: s, forecast: f };
  }

  /**
   * The fields of the `which` hash that `known` does not claim (plans deleted since they were
   * stored), by HSCAN pages of `count` fields: a sweep the pacer runs only when {@link counts}
   * exceed what its reads found, and off its tick's path.
   */
  async unknownFields(
    which: 'state' | 'forecast',
    known: (field: string) => boolean,
    count = 10_000,
  ): Promise<string[]> {
    const key = this.options.keys[which];
    const out: string[] = [];
    let cursor = '0';
    do {
      const [next, flat] = await this.options.redis.hscan(key, cursor, 'COUNT', count);
      for (let i = 0; i + 1 < flat.length; i += 2) {
        const field = flat[i] as string;
        if (!known(field)) out.push(field);
      }
      cursor = next;
    } while (cursor !== '0');
    return out;
  }

  /** Closes the raw connection (it also closes with the client). */
  close(): void {
    this.reader.close();
  }
}

/**
 * Plans per part of the tick's own reads (the spend read's parts: a part's stored state arrives
 * beside its spend). Fields per part of the reads of the plans the tick does not step (other
 * campaigns' plans of the budgets, plans this process met before): only their stored state is
 * adopted. Campaign hashes per part of the read of what the predecessor published.
 */
const REST_PART = 1_000;
const PUBLISHED_PART = 500;

/** A takeover's reload in flight ({@link TakeoverReloads.begin}). */
export interface Reload {
  /** Part k: the plans [k · part size, …) of the tick's list hold what was stored. */
  readonly parts: Promise<void>[];
  /** Every other plan holds what was stored (awaited before the publish encodes state). */
  readonly rest: Promise<void>;
  /**
   * Per active campaign, what its hash holds now: `plans`, then `p:` and `e:` of each of its
   * plans in publishing order (undefined: no such field).
   */
  readonly published: Promise<(string | undefined)[][]>;
  readonly startedAt: number;
}

/** Options of {@link TakeoverReloads}. */
export interface TakeoverReloadsOptions {
  readonly redis: RedisClient;
  readonly keys: Pick<ShardKeys, 'state' | 'forecast' | 'campaign'>;
  readonly clock: Clock;
  /** The pacer's plan memories (what is read is adopted into them). */
  readonly book: PlanBook;
  /** Longest silence of the node while replies are due, ms. @default 1000 */
  readonly timeoutMs?: number;
}

/**
 * A takeover's loads of the controller state and forecasts the previous publisher stored, so the
 * new publisher continues them (no jump in the parameters at a leader change). A plan with nothing
 * stored keeps this process's own state.
 */
export class TakeoverReloads {
  private reloader: StateReloader | undefined;
  /** The sweep for fields of deleted plans, while it runs. */
  private sweeping: Promise<void> | undefined;
  /** Reloads begun (the latest one's parts adopt what they read). */
  private generation = 0;
  /** Fields of deleted plans found by a sweep, for a later publish to delete. */
  pendingDeletes: { state: string[]; forecast: string[] } = { state: [], forecast: [] };

  constructor(private readonly options: TakeoverReloadsOptions) {}

  /**
   * Begins the reads, in parts (see the module comment): part k of the tick's plan list (parts of
   * `partSize`, aligned with the spend read's), then every other plan of this process and of the
   * budgets (`everyCampaign`: paused campaigns' plans are adopted, not stepped), and what each of
   * the active `campaigns`' hashes holds. Forgets what this process believed was stored. Fields
   * of plans that no longer exist are looked for only when a hash holds more than the reads found
   * ({@link sweepUnknown}).
   */
  begin(
    planList: PlanList,
    campaigns: readonly CampaignBudgets[],
    everyCampaign: Iterable<CampaignBudgets>,
    partSize: number,
  ): Reload {
    const startedAt = this.options.clock.now();
    const reloader = this.reader();
    // A reload of a tick that failed may still be landing: only the latest one adopts.
    const generation = ++this.generation;
    const plans = this.options.book.plans;
    for (const m of plans.values()) {
      m.writtenState = undefined;
      m.writtenForecast = undefined;
    }
    const fields = planList.list.map((p) => p.field);
    const rest = this.restOfPlans(planList, everyCampaign);
    const found = { state: 0, forecast: 0 };
    const adopt = (field: string, plan: ResolvedPlan | undefined, texts: StoredTexts, j: number) => {
      if (generation !== this.generation) return;
      const s = texts.state[j];
      const f = texts.forecast[j];
      if (s === undefined && f === undefined) return;
      let m = plans.get(field);
      if (!m) {
        m = { plan: plan as ResolvedPlan, state: undefined, forecast: undefined };
        plans.set(field, m);
      }
      if (s !== undefined) {
        m.loadedState = s;
        m.writtenState = s;
        found.state++;
      }
      if (f !== undefined) {
        m.loadedForecast = f;
        m.writtenForecast = f;
        found.forecast++;
      }
    };
    const sizes = reloader.counts();
    sizes.catch(() => {});
    const parts = reloader.read(fields, partSize).map((part, k) =>
      part.then((texts) => {
        const from = k * partSize;
        for (let j = 0; j < texts.state.length; j++) adopt(fields[from + j] as string, undefined, texts, j);
      }),
    );
    const restRead = Promise.all(
      reloader.read(rest.fields, REST_PART).map((part, k) =>
        part.then((texts) => {
          const from = k * REST_PART;
          for (let j = 0; j < texts.state.length; j++) {
            adopt(rest.fields[from + j] as string, rest.plans[from + j], texts, j);
          }
        }),
      ),
    ).then(async () => {
      await Promise.all(parts);
      const stored = await sizes;
      if (stored.state > found.state || stored.forecast > found.forecast) {
        this.sweepUnknown(stored.state > found.state, stored.forecast > found.forecast, rest.unpaced);
      }
    });
    const published = this.readPublished(campaigns);
    // Handled here too: a tick that fails at an earlier part never awaits the later ones.
    for (const p of parts) p.catch(() => {});
    restRead.catch(() => {});
    published.catch(() => {});
    return { parts, rest: restRead, published, startedAt };
  }

  /** Waits for a sweep of deleted plans' fields in progress (tests). */
  async settled(): Promise<void> {
    await this.sweeping;
  }

  /**
   * Closes the reads' raw connection, if a reload opened one (it also closes with the client); a
   * later reload opens a new one.
   */
  close(): void {
    this.reloader?.close();
    this.reloader = undefined;
  }

  private reader(): StateReloader {
    this.reloader ??= new StateReloader({
      redis: this.options.redis,
      keys: this.options.keys,
      ...(this.options.timeoutMs === undefined ? {} : { timeoutMs: this.options.timeoutMs }),
    });
    return this.reloader;
  }

  /**
   * Plans not stepped this tick: this process's other memories, and the plans of the campaigns
   * not paced (paused: the active ones' are all in the list) that it has no memory of (one is
   * made only if something is stored for them).
   */
  private restOfPlans(
    planList: PlanList,
    everyCampaign: Iterable<CampaignBudgets>,
  ): { fields: string[]; plans: (ResolvedPlan | undefined)[]; unpaced: Set<string> } {
    const plans = this.options.book.plans;
    const fields: string[] = [];
    const resolved: (ResolvedPlan | undefined)[] = [];
    for (const [field, m] of plans) {
      if (m.listedIn === planList.id) continue;
      fields.push(field);
      resolved.push(undefined);
    }
    const unpaced = new Set<string>();
    for (const b of everyCampaign) {
      if (b.campaign.status === 'active') continue;
      for (const p of plansOfCampaign(b)) {
        const field = planField(p);
        if (plans.has(field) || unpaced.has(field)) continue;
        unpaced.add(field);
        fields.push(field);
        resolved.push(p);
      }
    }
    return { fields, plans: resolved, unpaced };
  }

  /**
   * What the predecessor published in each campaign hash (read after the state: the state is
   * needed first, to step), so the whole rewrite skips the fields that already hold their value.
   */
  private readPublished(campaigns: readonly CampaignBudgets[]): Promise<(string | undefined)[][]> {
    const { keys } = this.options;
    return Promise.all(
      this.reader().hmget(
        campaigns.map((b) => keys.campaign(b.campaign.campaignId)),
        (i) => campaignFields(campaigns[i] as CampaignBudgets),
        PUBLISHED_PART,
      ),
    ).then((parts) => parts.flat());
  }

  /**
   * Finds the fields of plans that no longer exist (neither in the budgets nor met by this
   * process), off the tick's path; the next publish deletes them. One sweep at a time.
   */
  private sweepUnknown(state: boolean, forecast: boolean, unpaced: Set<string>): void {
    if (this.sweeping) return;
    const reloader = this.reader();
    const plans = this.options.book.plans;
    // Every plan of the list, and every plan found stored, has a memory by now.
    const isKnown = (field: string) => plans.has(field) || unpaced.has(field);
    this.sweeping = Promise.all([
      state ? reloader.unknownFields('state', isKnown) : [],
      forecast ? reloader.unknownFields('forecast', isKnown) : [],
    ])
      .then(([s, f]) => {
        this.pendingDeletes = { state: s, forecast: f };
      })
      // A failed sweep is retried at the next takeover; nothing depends on it but memory.
      .catch(() => {})
      .finally(() => {
        this.sweeping = undefined;
      });
  }
}
