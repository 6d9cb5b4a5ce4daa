/**
 * The building blocks `createPacelineClient` wires, each from the client's configuration:
 * connections ({@link connectParts}: Redis, DynamoDB, Kinesis), the budgets, ledger and
 * reconciler, the pacing reader and budget guard (the guard's E(t) is the reader's published
 * curve), the action store and the two event producers; and {@link CampaignTracking}, which
 * loads the budgets of tracked campaigns into the guard, warms them up and re-reads them.
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { KinesisClient } from '@aws-sdk/client-kinesis';
import { dynamoDbClient, kinesisClient, ssmClient } from '../aws/clients.js';
import type { CampaignBudgets } from '../budget/model.js';
import { BudgetRepository } from '../budget/repository.js';
import { ActionStore } from '../counting/store.js';
import { PacelineError } from '../errors.js';
import { KinesisProducer } from '../kinesis/producer.js';
import { resolvePacerShards } from '../pacing/control.js';
import { PacingReader, publishedCurve } from '../pacing/reader.js';
import { guardAllocations } from '../pacing/regions/allocation-config.js';
import { connectRedis, type RedisClient, type RedisConfig } from '../redis/connect.js';
import { BudgetGuard, type BudgetGuardOptions, InvalidGuardOptionsError } from '../spend/guard.js';
import { SpendLedger } from '../spend/ledger.js';
import { budgetsTableReconciler, defaultInFlight } from '../spend/reconcile.js';
import type { Clock } from '../time/clock.js';
import { type ClientResources, InvalidClientConfigError, type PacelineClientConfig } from './config.js';

/** A campaign the client tracked is gone from the budgets table (reported to `onError`). */
export class CampaignRemovedError extends PacelineError {
  override readonly name = 'CampaignRemovedError';
  override readonly code = 'client.campaign-removed';
  constructor(readonly campaignId: string) {
    super(
      `Campaign ${campaignId} is no longer in the budgets table; its last budgets stay in force ` +
        '(restore it with `npm run budgets`, or stop bidding for it).',
    );
  }
}

/** The pacer shard count: the configured one, else the region's SSM parameter. */
export async function resolveClientShards(config: PacelineClientConfig): Promise<number> {
  if (config.pacerShards !== undefined) return config.pacerShards;
  const ssm = ssmClient(config.endpoints);
  try {
    return await resolvePacerShards({}, ssm, config.endpoints.region);
  } finally {
    ssm.destroy();
  }
}

/** The guard options a client configuration tunes (`config.guard`). */
type GuardTuning = keyof Omit<NonNullable<PacelineClientConfig['guard']>, 'maintainIntervalMs'>;

/** What {@link connectParts} builds. */
export interface ClientParts {
  readonly redis: RedisClient;
  /** The client opened `redis` (and closes it); false when the caller passed a client. */
  readonly ownRedis: boolean;
  readonly dynamodb: DynamoDBClient;
  readonly kinesis: Pick<KinesisClient, 'send' | 'destroy'>;
  readonly budgets: BudgetRepository;
  readonly pacing: PacingReader;
  readonly guard: BudgetGuard;
  readonly actions: ActionStore;
  readonly actionsProducer: KinesisProducer;
  readonly spendProducer: KinesisProducer;
}

function isRedisClient(value: RedisConfig | RedisClient): value is RedisClient {
  return typeof (value as RedisClient).defineCommand === 'function';
}

/** Connects and builds the client's parts; background failures go to `report`. */
export function connectParts(
  config: PacelineClientConfig,
  context: {
    readonly shards: number;
    readonly resources: ClientResources;
    readonly clock: Clock;
    readonly report: (error: unknown) => void;
  },
): ClientParts {
  const { report } = context;
  const ownRedis = !isRedisClient(config.redis);
  const redis = isRedisClient(config.redis) ? config.redis : connectRedis(config.redis);
  if (ownRedis) redis.on('error', report);
  const dynamodb = dynamoDbClient(config.endpoints);
  const kinesis = config.kinesis ?? kinesisClient(config.endpoints);
  try {
    return {
      redis,
      ownRedis,
      dynamodb,
      kinesis,
      ...buildParts(config, { ...context, redis, dynamodb, kinesis }),
    };
  } catch (error) {
    // A part refused its options: close what was opened, so a caller that catches is left with nothing running.
    if (ownRedis) redis.disconnect();
    dynamodb.destroy();
    if (!config.kinesis) kinesis.destroy();
    throw error;
  }
}

/** The parts on top of the connections (their constructors validate the configuration). */
function buildParts(
  config: PacelineClientConfig,
  context: Parameters<typeof connectParts>[1] & Pick<ClientParts, 'redis' | 'dynamodb' | 'kinesis'>,
): Omit<ClientParts, 'redis' | 'ownRedis' | 'dynamodb' | 'kinesis'> {
  const { shards, resources, clock, report, redis, dynamodb, kinesis } = context;
  const budgets = new BudgetRepository({
    client: dynamodb,
    tableName: resources.budgetsTable,
    pacerShards: shards,
  });
  // The guard rebuilds this region's live counters from this region's wins in the ledger.
  const ledger = new SpendLedger({
    client: dynamodb,
    tableName: resources.spendLedgerTable,
    region: config.endpoints.region,
    clock,
  });
  const inFlight = config.inFlight ?? defaultInFlight;
  const reconciler = budgetsTableReconciler({ redis, ledger, clock, inFlight, budgets });
  const pacing = new PacingReader({ ...config.pacing, redis, clock, shards, onError: report });
  const guard = newGuard(config, {
    redis,
    clock,
    inFlight,
    curve: publishedCurve(pacing),
    initPlanDay: (plan, day) => reconciler.reconcile(plan, day),
    onError: report,
  });
  const actions = new ActionStore({ ...config.actions, redis, clock });
  const producer = (streamName: string) =>
    new KinesisProducer({ ...config.producer, client: kinesis, streamName });
  return {
    budgets,
    pacing,
    guard,
    actions,
    actionsProducer: producer(resources.actionsStream),
    spendProducer: producer(resources.spendStream),
  };
}

/**
 * The guard with the configuration's tuning and allocations; a tuning value the guard refuses
 * ({@link InvalidGuardOptionsError} naming it) becomes an {@link InvalidClientConfigError} naming `guard.…`.
 */
function newGuard(
  config: PacelineClientConfig,
  wiring: Omit<BudgetGuardOptions, 'allocations' | GuardTuning>,
): BudgetGuard {
  const { maintainIntervalMs: _, ...tuning } = config.guard ?? {};
  try {
    return new BudgetGuard({
      ...tuning,
      ...wiring,
      allocations: guardAllocations(
        config.allocations ?? 'off',
        config.regions ?? [config.endpoints.region],
        config.endpoints.region,
      ),
    });
  } catch (error) {
    if (!(error instanceof InvalidGuardOptionsError)) throw error;
    throw new InvalidClientConfigError(
      `guard: ${error.message} Fix the client configuration's \`guard\` tuning (docs/client.md).`,
      { cause: error },
    );
  }
}

async function mapLimit<T>(
  items: readonly T[],
  limit: number,
  fn: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await fn(items[next++] as T);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

/** What budgets a decision depends on, as a comparable string (a change means re-register). */
function fingerprint(b: CampaignBudgets): string {
  return JSON.stringify([b.account.timeZone, b.campaign.status, b.common, [...b.arms]]);
}

/**
 * The campaigns a client tracks: their budgets registered with the guard (again when they
 * change), their floats leased and pacing read before their first decision.
 */
export class CampaignTracking {
  /** Tracked campaigns: account id (pacing keys) and the fingerprint of the registered budgets. */
  private readonly tracked = new Map<string, { accountId: string; fingerprint: string }>();
  private readonly autoTracking = new Set<string>();

  constructor(
    private readonly parts: Pick<ClientParts, 'budgets' | 'guard' | 'pacing'>,
    private readonly report: (error: unknown) => void,
  ) {}

  /** The account of a tracked campaign, or undefined when it is not tracked. */
  accountOf(campaignId: string): string | undefined {
    return this.tracked.get(campaignId)?.accountId;
  }

  has(campaignId: string): boolean {
    return this.tracked.has(campaignId);
  }

  /** Loads, warms up and tracks campaigns (idempotent; refreshes ones already tracked). */
  async track(ids: readonly string[]): Promise<{ tracked: string[]; unknown: string[] }> {
    const unknown: string[] = [];
    const changed = await this.load([...new Set(ids)], unknown);
    await this.warm(changed);
    return { tracked: ids.filter((id) => this.tracked.has(id)), unknown };
  }

  /** Starts tracking a campaign in the background, once at a time (a bid saw it first). */
  trackInBackground(campaignId: string): void {
    if (this.autoTracking.has(campaignId)) return;
    this.autoTracking.add(campaignId);
    this.track([campaignId])
      .catch(this.report)
      .finally(() => this.autoTracking.delete(campaignId));
  }

  /** Re-reads the tracked campaigns' budgets; re-registers and warms up the changed ones. */
  async refresh(): Promise<void> {
    const unknown: string[] = [];
    const changed = await this.load([...this.tracked.keys()], unknown);
    for (const id of unknown) this.report(new CampaignRemovedError(id));
    await this.warm(changed);
  }

  /** Loads budgets; registers new or changed ones; returns the ids whose budgets changed. */
  private async load(ids: readonly string[], unknown: string[]): Promise<string[]> {
    const changed: string[] = [];
    await mapLimit(ids, 8, async (id) => {
      const b = await this.parts.budgets.getCampaignBudgets(id);
      if (!b) {
        unknown.push(id);
        return;
      }
      const f = fingerprint(b);
      if (this.tracked.get(id)?.fingerprint === f) return;
      this.parts.guard.setBudgets(b);
      this.tracked.set(id, { accountId: b.account.accountId, fingerprint: f });
      changed.push(id);
    });
    return changed;
  }

  private async warm(ids: readonly string[]): Promise<void> {
    await this.parts.pacing.prefetch(
      ids.map((id) => ({ accountId: this.accountOf(id) as string, campaignId: id })),
    );
    await Promise.all(ids.map((id) => this.parts.guard.warmUp(id)));
  }
}

/**
 * Runs `fn` every `ms` in the background (unref'd); a round slower than the interval (DynamoDB
 * slow) is not overlapped by the next one; failures go to `report`. Returns the timer.
 */
export function every(
  ms: number,
  fn: () => Promise<void> | void,
  report: (error: unknown) => void,
): NodeJS.Timeout {
  let running = false;
  const t = setInterval(() => {
    if (running) return;
    running = true;
    Promise.resolve()
      .then(fn)
      .catch((e: unknown) => report(e))
      .finally(() => {
        running = false;
      });
  }, ms);
  t.unref();
  return t;
}
