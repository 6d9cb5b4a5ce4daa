/**
 * Stand-in for DynamoDB global tables between local regions (dynalite has no replication and no
 * streams). Each region's DynamoDB endpoint becomes a small HTTP proxy in front of its dynalite;
 * every successful write to a table the region description marks `global` (PutItem, UpdateItem,
 * DeleteItem, BatchWriteItem) is replicated to every other attached region with the semantics of
 * global tables (version 2019.11.21):
 *
 * - **asynchronous**: the writer gets its answer from its own replica at once; the item reaches
 *   the other replicas `lagMs` later (configurable, can be paused to model a long lag);
 * - **whole items**: the replica receives the item as it is after the write (read back from the
 *   source replica), or its deletion — as global tables replicate item images, not operations;
 * - **last writer wins per item**: every write is stamped (time of the write at its source,
 *   region name as the tie-break); a replica applies an incoming image only if its stamp is newer
 *   than the stamp of the last write it holds for that item — local or replicated — so
 *   concurrent writes in two regions converge to the same item everywhere;
 * - **per-item order**: images of one item are delivered in stamp order (one queue, FIFO by due
 *   time; the lag is the same for every write).
 *
 * - **a local write and an incoming image of the same item never interleave**: an image is applied
 *   to a replica only once no local write of that item is in flight there (the local write is
 *   stamped when it arrives, read back and stamped into the replica first), so a replicated image
 *   older than a local write can never overwrite it — the order last-writer-wins decides by;
 * - **conditions are local**: conditional expressions are evaluated against the local replica
 *   only, and a replicated image is applied unconditionally (it never evaluates, or fails, the
 *   receiving region's conditions), as in AWS.
 *
 * Not modelled: TTL deletion (dynalite has no TTL; in AWS an item TTL deletes in one replica is
 * deleted in every replica — Paceline's readers never depend on expiry, docs/spend.md), per-region
 * clock skew of the stamps, `aws:rep:*` attributes, streams. Writes made directly against a
 * dynalite (bypassing the proxy) are not replicated.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  type AttributeValue,
  DeleteItemCommand,
  DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
} from '@aws-sdk/client-dynamodb';
import { isGlobal, physicalName, regionResources } from '../shared/region/resources.js';
import { type Clock, systemClock } from '../shared/time/clock.js';

/** Options of {@link GlobalTablesStandIn}. */
export interface GlobalTablesOptions {
  /** Replication lag, ms (on `clock`). @default 500 */
  readonly lagMs?: number;
  /** Clock the lag is measured on (a ManualClock in tests; call {@link GlobalTablesStandIn.deliverDue}). @default systemClock */
  readonly clock?: Clock;
  /** How often due images are delivered, real ms. @default 20 */
  readonly pollMs?: number;
}

interface Replica {
  readonly region: string;
  readonly client: DynamoDBClient;
  readonly server: http.Server;
  readonly target: URL;
  /** Stamp of the last write applied per item (`table|key JSON`). */
  readonly stamps: Map<string, Stamp>;
  /** Local writes in flight per item (forwarded, not yet read back), and who waits for them. */
  readonly inFlight: Map<string, { count: number; waiters: (() => void)[] }>;
}

/** A write of one item of a global table, parsed from a request. */
interface ItemWrite {
  readonly table: string;
  readonly key: Record<string, AttributeValue>;
  /** `table|key JSON`. */
  readonly id: string;
}

/** Time of the write at its source, then arrival order among writes stamped in the same ms. */
type Stamp = readonly [atMs: number, seq: number, region: string];

interface Pending {
  readonly dueAtMs: number;
  readonly table: string;
  readonly key: Record<string, AttributeValue>;
  readonly image: Record<string, AttributeValue> | undefined;
  readonly stamp: Stamp;
  readonly from: string;
  /** Replicas still to receive it (undefined: every other replica). */
  readonly to?: readonly string[];
}

const WRITE_OPS = new Set(['PutItem', 'UpdateItem', 'DeleteItem', 'BatchWriteItem']);

/** Key attribute names of every global table, by physical name. */
function globalTables(): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const t of Object.values(regionResources.tables)) {
    if (isGlobal(t)) out.set(physicalName(t.suffix), [t.partitionKey.name, t.sortKey.name]);
  }
  return out;
}

/** Longest wait of an image for a local write of the same item (a hung dynalite must not stall replication for ever). */
const IN_FLIGHT_WAIT_MS = 5_000;

function newer(a: Stamp, b: Stamp | undefined): boolean {
  return b === undefined || a[0] > b[0] || (a[0] === b[0] && a[1] > b[1]);
}

/** Replication of the global tables between attached local regions (module comment). */
export class GlobalTablesStandIn {
  private readonly replicas = new Map<string, Replica>();
  private readonly tables = globalTables();
  private readonly clock: Clock;
  private lagMs: number;
  private queue: Pending[] = [];
  private paused = false;
  private delivering: Promise<void> = Promise.resolve();
  private readonly timer: NodeJS.Timeout;
  private seq = 0;
  /** Images applied to a replica / dropped because the replica held a newer write. */
  readonly stats = { replicated: 0, superseded: 0, errors: 0 };

  constructor(options: GlobalTablesOptions = {}) {
    this.clock = options.clock ?? systemClock;
    this.lagMs = options.lagMs ?? 500;
    this.timer = setInterval(() => void this.deliverDue(), options.pollMs ?? 20);
    this.timer.unref();
  }

  /** Starts the proxy in front of a region's dynalite; returns the endpoint its clients use. */
  async attach(region: string, dynaliteUrl: string): Promise<string> {
    const target = new URL(dynaliteUrl);
    const client = new DynamoDBClient({
      region,
      endpoint: dynaliteUrl,
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    });
    const server = http.createServer((req, res) => void this.proxy(region, req, res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    this.replicas.set(region, { region, client, server, target, stamps: new Map(), inFlight: new Map() });
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  /** Changes the lag of writes made from now on. */
  setLag(ms: number): void {
    this.lagMs = ms;
  }

  /** Holds every image until {@link resume} (a replication outage; writes keep being accepted). */
  pause(): void {
    this.paused = true;
  }

  resume(): void {
    this.paused = false;
  }

  /**
   * Cuts one region off (a region lost, or its link down): images from it and to it are held,
   * everything else keeps replicating; {@link reconnect} delivers what was held, in stamp order.
   */
  isolate(region: string): void {
    this.isolated.add(region);
  }

  /** Ends {@link isolate}: the held images become due now. */
  reconnect(region: string): void {
    this.isolated.delete(region);
    const now = this.clock.now();
    const held = this.held;
    this.held = [];
    for (const p of held) this.enqueue({ ...p, dueAtMs: Math.min(p.dueAtMs, now) });
  }

  private readonly isolated = new Set<string>();
  /** Images held for isolated regions (each with the replicas still to receive it). */
  private held: Pending[] = [];

  /** Images accepted but not yet delivered (held ones included). */
  get pending(): number {
    return this.queue.length + this.held.length;
  }

  /** Delivers every image whose lag has passed (in due order). */
  deliverDue(): Promise<void> {
    this.delivering = this.delivering.then(() => this.deliver(false));
    return this.delivering;
  }

  /** Delivers everything now, whatever the lag (tests: "after replication caught up"). */
  flush(): Promise<void> {
    this.delivering = this.delivering.then(() => this.deliver(true));
    return this.delivering;
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.delivering.catch(() => {});
    for (const r of this.replicas.values()) {
      r.client.destroy();
      r.server.closeAllConnections();
      await new Promise<void>((resolve) => r.server.close(() => resolve()));
    }
    this.replicas.clear();
  }

  private async deliver(all: boolean): Promise<void> {
    if (this.paused && !all) return;
    const now = this.clock.now();
    while (this.queue.length > 0 && (all || (this.queue[0] as Pending).dueAtMs <= now)) {
      const p = this.queue.shift() as Pending;
      const hold: string[] = [];
      for (const r of this.replicas.values()) {
        if (r.region === p.from || (p.to && !p.to.includes(r.region))) continue;
        if (this.isolated.has(p.from) || this.isolated.has(r.region)) {
          hold.push(r.region);
          continue;
        }
        const id = `${p.table}|${JSON.stringify(p.key)}`;
        // A local write of this item under way in r is stamped once it is read back: wait for it,
        // so the stamps below decide between the two writes (and not their arrival at dynalite).
        await this.quiet(r, id);
        if (!newer(p.stamp, r.stamps.get(id))) {
          this.stats.superseded++;
          continue;
        }
        r.stamps.set(id, p.stamp);
        try {
          if (p.image) await r.client.send(new PutItemCommand({ TableName: p.table, Item: p.image }));
          else await r.client.send(new DeleteItemCommand({ TableName: p.table, Key: p.key }));
          this.stats.replicated++;
        } catch {
          this.stats.errors++;
        }
      }
      if (hold.length > 0) this.held.push({ ...p, to: hold });
    }
  }

  private async proxy(region: string, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const replica = this.replicas.get(region) as Replica;
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks);
    const op = String(req.headers['x-amz-target'] ?? '').split('.')[1] ?? '';
    // The write's stamp, taken before it is forwarded (unique: the sequence orders one ms's writes).
    const stamp: Stamp = [this.clock.now(), this.seq++, region];
    const writes = WRITE_OPS.has(op) ? this.itemWrites(op, body) : [];
    for (const w of writes) this.begin(replica, w.id);
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      for (const w of writes) this.end(replica, w.id);
    };
    const upstream = http.request({
      host: replica.target.hostname,
      port: replica.target.port,
      method: req.method,
      path: req.url,
      headers: { ...req.headers, host: replica.target.host },
    });
    upstream.on('response', (up) => {
      const out: Buffer[] = [];
      up.on('data', (c: Buffer) => out.push(c));
      up.on('end', () => {
        const status = up.statusCode ?? 500;
        res.writeHead(status, up.headers);
        res.end(Buffer.concat(out));
        if (status === 200 && writes.length > 0) void this.capture(replica, writes, stamp).finally(release);
        else release();
      });
    });
    upstream.on('error', (error) => {
      release();
      res.writeHead(502, { 'content-type': 'text/plain' });
      res.end(`global-tables stand-in: dynalite unreachable (${error.message})`);
    });
    upstream.end(body);
  }

  /** The items of global tables a write request touches (none for other tables or bad JSON). */
  private itemWrites(op: string, body: Buffer): ItemWrite[] {
    let request: Record<string, unknown>;
    try {
      request = JSON.parse(body.toString('utf8')) as Record<string, unknown>;
    } catch {
      return [];
    }
    const writes: ItemWrite[] = [];
    const add = (table: string, item: Record<string, AttributeValue> | undefined) => {
      const names = this.tables.get(table);
      if (!names || !item) return;
      const key = Object.fromEntries(names.map((n) => [n, item[n] as AttributeValue]));
      writes.push({ table, key, id: `${table}|${JSON.stringify(key)}` });
    };
    if (op === 'BatchWriteItem') {
      const items = (request.RequestItems ?? {}) as Record<
        string,
        {
          PutRequest?: { Item: Record<string, AttributeValue> };
          DeleteRequest?: { Key: Record<string, AttributeValue> };
        }[]
      >;
      for (const [table, list] of Object.entries(items)) {
        for (const w of list) add(table, w.PutRequest?.Item ?? w.DeleteRequest?.Key);
      }
    } else {
      add(
        String(request.TableName ?? ''),
        (op === 'PutItem' ? request.Item : request.Key) as Record<string, AttributeValue> | undefined,
      );
    }
    return writes;
  }

  /** Reads back the written items and queues their images. */
  private async capture(replica: Replica, writes: readonly ItemWrite[], stamp: Stamp): Promise<void> {
    for (const w of writes) {
      if (!newer(stamp, replica.stamps.get(w.id))) continue;
      replica.stamps.set(w.id, stamp);
      try {
        const out = await replica.client.send(
          new GetItemCommand({ TableName: w.table, Key: w.key, ConsistentRead: true }),
        );
        this.enqueue({
          dueAtMs: stamp[0] + this.lagMs,
          table: w.table,
          key: w.key,
          image: out.Item,
          stamp,
          from: replica.region,
        });
      } catch {
        this.stats.errors++;
      }
    }
  }

  private begin(replica: Replica, id: string): void {
    const entry = replica.inFlight.get(id);
    if (entry) entry.count++;
    else replica.inFlight.set(id, { count: 1, waiters: [] });
  }

  private end(replica: Replica, id: string): void {
    const entry = replica.inFlight.get(id);
    if (!entry) return;
    entry.count--;
    if (entry.count > 0) return;
    replica.inFlight.delete(id);
    for (const wake of entry.waiters) wake();
  }

  /** Resolves once no local write of `id` is in flight in `replica` (bounded: IN_FLIGHT_WAIT_MS). */
  private quiet(replica: Replica, id: string): Promise<void> {
    const entry = replica.inFlight.get(id);
    if (!entry) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, IN_FLIGHT_WAIT_MS);
      entry.waiters.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  private enqueue(p: Pending): void {
    // Keep due order (a lag lowered meanwhile may put a write ahead of older ones).
    let i = this.queue.length;
    while (i > 0 && (this.queue[i - 1] as Pending).dueAtMs > p.dueAtMs) i--;
    this.queue.splice(i, 0, p);
  }
}
