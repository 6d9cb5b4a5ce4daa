/**
 * Leader leases of pacer shards on DynamoDB conditional writes (leases table, generic pk/sk):
 * one item per shard, `pk = PACER#<shard>`, `sk = LEASE`, with
 *
 * - `holder`   the instance id holding it (`s<shard>-i<k>`), `''` after a clean release;
 * - `epoch`    grows by one on every acquisition and never decreases (a release keeps it), so
 *              it orders holders: the fence's `e`;
 * - `expiresAt` epoch ms on the holder's clock; checked in code against the injected clock
 *              (dynalite has no TTL, and DynamoDB TTL deletes late anyway);
 * - `since`    when the holding invocation started (see below), `renewedAt`, `process`.
 *
 * Every tick each instance calls {@link ShardLease.tick}: the holder renews (conditional on holder
 * and epoch), others take over when the lease is absent, released or expired (conditional on the
 * epoch they read, so two contenders cannot both win). A Lambda invocation of an instance lives
 * one minute and the next one may run in another process: a newer invocation of the *holding
 * instance* adopts the lease at once (epoch + 1, no wait for expiry), which also fences out an
 * older invocation of the same instance that is still running (late, or paused and resumed). The
 * older one sees the newer `since` and does not adopt it back.
 *
 * Invocations of one instance overlap (each covers a minute plus the delivery-delay overlap:
 * shared/pacing/invocation.ts), so each also registers its start in the shard's `STARTS` item
 * (`pk = PACER#<shard>`, `sk = STARTS`, one attribute per instance id: the latest start,
 * conditional on being later). An older invocation that sees a later start of its own instance
 * is {@link ShardLease.superseded}: the newer one covers the rest of its window, so it may end.
 */
import { ConditionalCheckFailedException, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import {
  DynamoDBDocumentClient,
  GetCommand,
  PutCommand,
  QueryCommand,
  UpdateCommand,
} from '@aws-sdk/lib-dynamodb';
import type { Clock } from '../time/clock.js';

/** The stored lease of a shard. */
export interface LeaseRecord {
  readonly holder: string;
  readonly epoch: number;
  readonly expiresAtMs: number;
  readonly sinceMs: number;
  readonly renewedAtMs: number;
  readonly process: string;
}

/** What a tick learnt about the lease. */
export interface LeaseView {
  /** True while this invocation holds an unexpired lease (on its own clock). */
  readonly held: boolean;
  /** Epoch of this invocation's lease when held. */
  readonly epoch: number;
  /** The lease as last read or written (undefined: never read, or no lease exists). */
  readonly record: LeaseRecord | undefined;
  /** What happened this tick. */
  readonly event: 'acquired' | 'adopted' | 'renewed' | 'lost' | 'follower' | 'released' | 'unavailable';
  /** The DynamoDB error when `event` is `unavailable` (the last known state is kept). */
  readonly error?: unknown;
}

/** Options of {@link ShardLease}. */
export interface ShardLeaseOptions {
  readonly client: DynamoDBClient;
  readonly tableName: string;
  readonly shard: number;
  /** This instance's id (`s<shard>-i<k>`). */
  readonly instanceId: string;
  /** Identifies the process / invocation (diagnostics only). */
  readonly processId: string;
  /** When this invocation started: a newer invocation of the holder adopts the lease. */
  readonly invocationStartMs: number;
  readonly ttlMs: number;
  readonly clock: Clock;
}

/** The DynamoDB key of a shard's lease. */
export function leaseKey(shard: number): { pk: string; sk: string } {
  return { pk: `PACER#${shard}`, sk: 'LEASE' };
}

/** The DynamoDB key of a shard's invocation starts (the latest start of each instance). */
export function startsKey(shard: number): { pk: string; sk: string } {
  return { pk: `PACER#${shard}`, sk: 'STARTS' };
}

function toRecord(item: Record<string, unknown> | undefined): LeaseRecord | undefined {
  if (!item) return undefined;
  return {
    holder: String(item.holder ?? ''),
    epoch: Number(item.epoch ?? 0),
    expiresAtMs: Number(item.expiresAt ?? 0),
    sinceMs: Number(item.since ?? 0),
    renewedAtMs: Number(item.renewedAt ?? 0),
    process: String(item.process ?? ''),
  };
}

/** Reads a shard's lease (consistent read); undefined when none was ever taken. */
export async function readLease(
  doc: DynamoDBDocumentClient,
  tableName: string,
  shard: number,
): Promise<LeaseRecord | undefined> {
  const out = await doc.send(
    new GetCommand({ TableName: tableName, Key: leaseKey(shard), ConsistentRead: true }),
  );
  return toRecord(out.Item);
}

/** Reads a shard's lease and its instances' latest invocation starts in one consistent query. */
async function readShard(
  doc: DynamoDBDocumentClient,
  tableName: string,
  shard: number,
): Promise<{ lease: LeaseRecord | undefined; starts: Record<string, unknown> }> {
  const out = await doc.send(
    new QueryCommand({
      TableName: tableName,
      KeyConditionExpression: 'pk = :pk',
      ExpressionAttributeValues: { ':pk': leaseKey(shard).pk },
      ConsistentRead: true,
    }),
  );
  const items = out.Items ?? [];
  return {
    lease: toRecord(items.find((i) => i.sk === leaseKey(shard).sk)),
    starts: items.find((i) => i.sk === startsKey(shard).sk) ?? {},
  };
}

/** One instance's view of, and hold on, its shard's lease. */
export class ShardLease {
  private readonly doc: DynamoDBDocumentClient;
  private mine: { epoch: number; expiresAtMs: number } | undefined;
  private last: LeaseRecord | undefined;
  private registered = false;
  private newerStartMs: number | undefined;

  constructor(private readonly options: ShardLeaseOptions) {
    this.doc = DynamoDBDocumentClient.from(options.client);
  }

  /** True while this invocation holds the lease and, on its clock, it has not expired. */
  heldAt(nowMs: number): boolean {
    return this.mine !== undefined && nowMs < this.mine.expiresAtMs;
  }

  /** The epoch held (0 when none). */
  get epoch(): number {
    return this.mine?.epoch ?? 0;
  }

  /** The lease as last seen. */
  get record(): LeaseRecord | undefined {
    return this.last;
  }

  /**
   * A newer invocation of this instance has registered its start (seen at a tick) and this one
   * does not hold the lease: the newer one covers the rest of this invocation's window, which may
   * end. (The newer one adopts the lease in the tick it registers, so a superseded holder learns
   * it at its next renewal.)
   */
  get superseded(): boolean {
    return this.newerStartMs !== undefined && !this.heldAt(this.options.clock.now());
  }

  /**
   * Renews the lease, or tries to take it; never throws for DynamoDB errors (`unavailable`). The
   * first tick also registers this invocation's start (again at the next tick if DynamoDB failed).
   */
  async tick(): Promise<LeaseView> {
    const now = this.options.clock.now();
    const registering = this.registered ? undefined : this.register();
    try {
      return await this.decide(now);
    } catch (error) {
      return { ...this.view('unavailable', now), error };
    } finally {
      await registering;
    }
  }

  private async decide(now: number): Promise<LeaseView> {
    if (this.mine) {
      if (await this.renew(now)) return this.view('renewed', now);
      this.mine = undefined;
      await this.read();
      return this.view('lost', now);
    }
    const current = await this.read();
    if (!current) {
      return (await this.take(now, undefined)) ? this.view('acquired', now) : this.view('follower', now);
    }
    const ownInstance = current.holder === this.options.instanceId;
    if (ownInstance && this.options.invocationStartMs > current.sinceMs) {
      return (await this.take(now, current)) ? this.view('adopted', now) : this.view('follower', now);
    }
    if (current.holder === '' || current.expiresAtMs <= now) {
      return (await this.take(now, current)) ? this.view('acquired', now) : this.view('follower', now);
    }
    return this.view('follower', now);
  }

  /** Reads the lease and the instances' starts; notes a later start of this instance. */
  private async read(): Promise<LeaseRecord | undefined> {
    const { lease, starts } = await readShard(this.doc, this.options.tableName, this.options.shard);
    this.last = lease;
    const latest = Number(starts[this.options.instanceId] ?? 0);
    if (latest > this.options.invocationStartMs) this.newerStartMs = latest;
    return lease;
  }

  /**
   * Records this invocation's start as its instance's latest, unless a later one is recorded.
   * Never throws: a DynamoDB error leaves it for the next tick.
   */
  private async register(): Promise<void> {
    try {
      await this.doc.send(
        new UpdateCommand({
          TableName: this.options.tableName,
          Key: startsKey(this.options.shard),
          UpdateExpression: 'SET #i = :start',
          ConditionExpression: 'attribute_not_exists(#i) OR #i < :start',
          ExpressionAttributeNames: { '#i': this.options.instanceId },
          ExpressionAttributeValues: { ':start': this.options.invocationStartMs },
        }),
      );
      this.registered = true;
    } catch (error) {
      if (!(error instanceof ConditionalCheckFailedException)) return;
      // An invocation of this instance that started later (or at the same instant) registered
      // first: it covers this one's window.
      this.registered = true;
      this.newerStartMs = this.options.invocationStartMs;
    }
  }

  /** Releases the lease on a clean stop, keeping its epoch (a later holder gets a higher one). */
  async release(): Promise<LeaseView> {
    const now = this.options.clock.now();
    const mine = this.mine;
    if (!mine) return this.view('follower', now);
    this.mine = undefined;
    try {
      await this.doc.send(
        new UpdateCommand({
          TableName: this.options.tableName,
          Key: leaseKey(this.options.shard),
          UpdateExpression: 'SET holder = :none, expiresAt = :zero, renewedAt = :now',
          ConditionExpression: 'holder = :me AND epoch = :e',
          ExpressionAttributeValues: {
            ':none': '',
            ':zero': 0,
            ':now': now,
            ':me': this.options.instanceId,
            ':e': mine.epoch,
          },
        }),
      );
      return this.view('released', now);
    } catch (error) {
      // Lost meanwhile, or DynamoDB unreachable: the lease then simply expires.
      return { ...this.view('released', now), error };
    }
  }

  private view(event: LeaseView['event'], now: number): LeaseView {
    return { held: this.heldAt(now), epoch: this.epoch, record: this.last, event };
  }

  private async renew(now: number): Promise<boolean> {
    const mine = this.mine as { epoch: number; expiresAtMs: number };
    const expiresAtMs = now + this.options.ttlMs;
    try {
      await this.doc.send(
        new UpdateCommand({
          TableName: this.options.tableName,
          Key: leaseKey(this.options.shard),
          UpdateExpression: 'SET expiresAt = :exp, renewedAt = :now',
          ConditionExpression: 'holder = :me AND epoch = :e',
          ExpressionAttributeValues: {
            ':exp': expiresAtMs,
            ':now': now,
            ':me': this.options.instanceId,
            ':e': mine.epoch,
          },
        }),
      );
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return false;
      throw error;
    }
    this.mine = { epoch: mine.epoch, expiresAtMs };
    this.last = {
      holder: this.options.instanceId,
      epoch: mine.epoch,
      expiresAtMs,
      sinceMs: this.options.invocationStartMs,
      renewedAtMs: now,
      process: this.options.processId,
    };
    return true;
  }

  /** Takes the lease over from `current` (or creates it), conditional on the epoch read. */
  private async take(now: number, current: LeaseRecord | undefined): Promise<boolean> {
    const epoch = (current?.epoch ?? 0) + 1;
    const record: LeaseRecord = {
      holder: this.options.instanceId,
      epoch,
      expiresAtMs: now + this.options.ttlMs,
      sinceMs: this.options.invocationStartMs,
      renewedAtMs: now,
      process: this.options.processId,
    };
    const item = {
      ...leaseKey(this.options.shard),
      holder: record.holder,
      epoch,
      expiresAt: record.expiresAtMs,
      since: record.sinceMs,
      renewedAt: now,
      acquiredAt: now,
      process: record.process,
    };
    try {
      await this.doc.send(
        new PutCommand({
          TableName: this.options.tableName,
          Item: item,
          ...(current
            ? { ConditionExpression: 'epoch = :e', ExpressionAttributeValues: { ':e': current.epoch } }
            : { ConditionExpression: 'attribute_not_exists(pk)' }),
        }),
      );
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) {
        // Someone else won the race: read who, for the view.
        this.last = await readLease(this.doc, this.options.tableName, this.options.shard);
        return false;
      }
      throw error;
    }
    this.mine = { epoch, expiresAtMs: record.expiresAtMs };
    this.last = record;
    return true;
  }
}
