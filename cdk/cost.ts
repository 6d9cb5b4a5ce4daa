/**
 * Monthly cost of one Paceline region on paper, computed from the region description the stack is
 * built from (shared/region/resources.ts) and the deployment settings in cdk.json, with the unit
 * prices below (on-demand list prices, us-east-1, with the page each comes from). Nothing here
 * calls AWS: the layout is the description's, the traffic is an explicit assumption printed beside
 * the result, and every line says what it counts.
 *
 *   npm run cost                        # every region of cdk.json, its own layout, and 256 shards
 *   npm run cost -- --shards 48 --json  # another layout; JSON instead of the table
 *   npm run cost -- --actions-per-sec 20000 --notices-per-sec 5000 --win-rate 0.2
 *
 * docs/operations.md ("Cost on paper") holds the table this prints.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { pacerAlarmSpecs } from '../shared/pacing/alarms.js';
import { BEHIND_REASONS } from '../shared/pacing/delivery-counts.js';
import { regionEndpoints } from '../shared/region/access.js';
import { type DeployedRegion, deploymentSettings } from '../shared/region/deployment.js';
import { type RegionDescription, regionDescription } from '../shared/region/resources.js';

/** On-demand list prices (USD), us-east-1; the page each was read from. */
export const unitPrices = {
  /** aws.amazon.com/lambda/pricing: Arm, first tier. */
  lambdaGbSecondArm: 0.0000133334,
  /** aws.amazon.com/lambda/pricing: per request. */
  lambdaRequest: 0.2 / 1e6,
  /** aws.amazon.com/elasticache/pricing: cache.r7g.large, Valkey on-demand node-hour. */
  cacheNodeHour: {
    'cache.r7g.large': 0.1752,
    'cache.r7g.xlarge': 0.3504,
    'cache.r7g.2xlarge': 0.7008,
  } as Record<string, number>,
  /** aws.amazon.com/kinesis/data-streams/pricing: provisioned shard-hour. */
  kinesisShardHour: 0.015,
  /** aws.amazon.com/kinesis/data-streams/pricing: per million PUT payload units (25 KB). */
  kinesisPutUnit: 0.014 / 1e6,
  /** aws.amazon.com/kinesis/data-streams/pricing: on-demand stream-hour. */
  kinesisOnDemandStreamHour: 0.04,
  /** aws.amazon.com/kinesis/data-streams/pricing: on-demand data written, per GB. */
  kinesisOnDemandGbWritten: 0.08,
  /** aws.amazon.com/dynamodb/pricing/on-demand: per write request unit. */
  dynamoWrite: 0.625 / 1e6,
  /** aws.amazon.com/dynamodb/pricing/on-demand: per replicated write request unit (global tables). */
  dynamoReplicatedWrite: 0.625 / 1e6,
  /** aws.amazon.com/dynamodb/pricing/on-demand: per read request unit. */
  dynamoRead: 0.125 / 1e6,
  /** aws.amazon.com/privatelink/pricing: interface endpoint, per AZ-hour. */
  interfaceEndpointAzHour: 0.01,
  /** aws.amazon.com/kms/pricing: per customer-managed key-month. */
  kmsKeyMonth: 1,
  /** aws.amazon.com/cloudwatch/pricing: standard-resolution alarm-month. */
  alarmMonth: 0.1,
  /** aws.amazon.com/cloudwatch/pricing: custom metric-month (first 10,000). */
  customMetricMonth: 0.3,
} as const;

/** Traffic a region serves: an assumption, printed with every result. */
export interface TrafficAssumption {
  /** User-action events per second (impressions, clicks…) onto the actions stream. */
  readonly actionsPerSec: number;
  /** Spend notices (win, loss, billing) per second onto the spend stream. */
  readonly noticesPerSec: number;
  /** Share of notices that are wins (one ledger item + an outbox intent written and deleted). */
  readonly winRate: number;
  /** User-action events per Kinesis record (the producer aggregates KPL records). */
  readonly actionsPerRecord: number;
}

/** The default traffic: a mid-size ad server fleet in one region. */
export const defaultTraffic: TrafficAssumption = {
  actionsPerSec: 5_000,
  noticesPerSec: 2_000,
  winRate: 0.25,
  actionsPerRecord: 10,
};

/**
 * Lambda compute per stream event, GB-s: the counting and spend benchmarks' per-process rates
 * (`npm run bench -- counting|spend`: ingest ≥ 50,000 events/s on one vCPU, track-spend's applies
 * ~2× costlier per event) at the functions' memory, plus a batch's fixed cost spread over it.
 */
const ingestSecondsPerEvent = 1 / 50_000;
const trackSecondsPerEvent = 2 / 50_000;
const HOURS_PER_MONTH = 730;
const SECONDS_PER_MONTH = HOURS_PER_MONTH * 3600;
const MINUTES_PER_MONTH = HOURS_PER_MONTH * 60;
const AZS = 3;

/** One line of the cost table. */
export interface CostLine {
  readonly item: string;
  readonly monthlyUsd: number;
  /** What was counted, in words and figures. */
  readonly basis: string;
}

/** The cost of one region. */
export interface RegionCost {
  readonly region: string;
  readonly shards: number;
  readonly instancesPerShard: number;
  readonly lines: readonly CostLine[];
  readonly totalUsd: number;
}

/** Adds one line of a region's cost. */
type AddCost = (item: string, monthlyUsd: number, basis: string) => void;

const eventsMonth = (rate: number) => rate * SECONDS_PER_MONTH;

/** The functions: the always-on pacer, the stream functions at the traffic, the sweeper. */
function lambdaCosts(d: RegionDescription, traffic: TrafficAssumption, add: AddCost): void {
  const p = unitPrices;
  const pacer = d.settings.pacer;
  const fn = d.functions;
  // The pacer runs all the time: an instance is invoked every minute and runs about a minute; an
  // invocation overlaps its successor by about a tick (shared/pacing/invocation.ts).
  const instances = pacer.shards * pacer.instancesPerShard;
  const pacerGb = fn.pacer.memoryMb / 1024;
  const billedSecondsPerMinute = 60 + pacer.tickMs / 1000;
  const pacerGbS = instances * pacerGb * billedSecondsPerMinute * MINUTES_PER_MONTH;
  add(
    'Lambda: pacer (always on)',
    pacerGbS * p.lambdaGbSecondArm + instances * MINUTES_PER_MONTH * p.lambdaRequest,
    `${instances} instances × ${fn.pacer.memoryMb} MB × ${billedSecondsPerMinute} s per minute = ${Math.round(pacerGbS / 1e6)} M GB-s; ${instances} invocations a minute`,
  );
  const batchSeconds = 0.01;
  const ingestBatch = fn.ingestActions.source.batchSize;
  const trackBatch = fn.trackSpend.source.batchSize;
  const streamGbS = (events: number, perEvent: number, batch: number, memoryMb: number) =>
    (events * perEvent + (events / batch) * batchSeconds) * (memoryMb / 1024);
  const ingestGbS = streamGbS(
    eventsMonth(traffic.actionsPerSec),
    ingestSecondsPerEvent,
    ingestBatch,
    fn.ingestActions.memoryMb,
  );
  const trackGbS = streamGbS(
    eventsMonth(traffic.noticesPerSec),
    trackSecondsPerEvent,
    trackBatch,
    fn.trackSpend.memoryMb,
  );
  const streamInvocations =
    eventsMonth(traffic.actionsPerSec / traffic.actionsPerRecord) / ingestBatch +
    eventsMonth(traffic.noticesPerSec) / trackBatch;
  add(
    'Lambda: ingest-actions, track-spend',
    (ingestGbS + trackGbS) * p.lambdaGbSecondArm + streamInvocations * p.lambdaRequest,
    `${traffic.actionsPerSec} actions/s, ${traffic.noticesPerSec} notices/s at the benchmarks' per-event CPU; ${Math.round((ingestGbS + trackGbS) / 1e6)} M GB-s`,
  );
  const sweepGbS = MINUTES_PER_MONTH * 2 * (fn.sweepSpend.memoryMb / 1024);
  add(
    'Lambda: sweep-spend',
    sweepGbS * p.lambdaGbSecondArm + MINUTES_PER_MONTH * p.lambdaRequest,
    `one invocation a minute, ~2 s at ${fn.sweepSpend.memoryMb} MB`,
  );
}

/** The cache cluster's nodes. */
function cacheCost(d: RegionDescription, add: AddCost): void {
  const p = unitPrices;
  const cache = d.settings.cache;
  const nodes = cache.shards * (1 + cache.replicasPerShard);
  const nodeHour = p.cacheNodeHour[cache.nodeType];
  if (nodeHour === undefined)
    throw new Error(`No price for cache node type ${cache.nodeType}: add it to unitPrices.cacheNodeHour.`);
  add(
    'ElastiCache (Valkey)',
    nodes * nodeHour * HOURS_PER_MONTH,
    `${nodes} × ${cache.nodeType} (${cache.shards} shards × ${1 + cache.replicasPerShard} nodes)`,
  );
}

/** The streams, on demand or provisioned as the description says. */
function streamCost(d: RegionDescription, traffic: TrafficAssumption, add: AddCost): void {
  const p = unitPrices;
  const streamSpecs = Object.values(d.streams);
  const records = traffic.actionsPerSec / traffic.actionsPerRecord + traffic.noticesPerSec;
  if (d.settings.streams.capacityMode === 'on-demand') {
    const gb = (eventsMonth(traffic.actionsPerSec) * 200 + eventsMonth(traffic.noticesPerSec) * 300) / 1e9;
    add(
      'Kinesis (on demand)',
      streamSpecs.length * p.kinesisOnDemandStreamHour * HOURS_PER_MONTH + gb * p.kinesisOnDemandGbWritten,
      `${streamSpecs.length} streams; ~${Math.round(gb)} GB written (200 B per action, 300 B per notice)`,
    );
  } else {
    const shardCount = streamSpecs.reduce((n, s) => n + s.shardCount, 0);
    add(
      'Kinesis (provisioned)',
      shardCount * p.kinesisShardHour * HOURS_PER_MONTH + eventsMonth(records) * p.kinesisPutUnit,
      `${shardCount} shards; ${Math.round(records)} records/s (actions aggregated ${traffic.actionsPerRecord} per record)`,
    );
  }
}

/** DynamoDB writes and reads: leases, region-spend summaries, the ledger, and their replication. */
function dynamoCost(d: RegionDescription, traffic: TrafficAssumption, regions: number, add: AddCost): void {
  const p = unitPrices;
  const pacer = d.settings.pacer;
  const instances = pacer.shards * pacer.instancesPerShard;
  // Every instance ticks its lease each tick; the publisher writes its region-spend summary each
  // tick (replicated to every other region); every instance queries its shard's budgets.
  const ticksPerMonth = (60_000 / pacer.tickMs) * MINUTES_PER_MONTH;
  const leaseWrites = instances * ticksPerMonth;
  const summaryWrites = pacer.shards * ticksPerMonth;
  const budgetReads = instances * ticksPerMonth * 0.5;
  const winsMonth = eventsMonth(traffic.noticesPerSec * traffic.winRate);
  // A win: its ledger item, an outbox intent written and deleted (all on global tables).
  const ledgerWrites = winsMonth * 3;
  const replicated = (summaryWrites + ledgerWrites) * (regions - 1);
  add(
    'DynamoDB (on demand, incl. replication)',
    (leaseWrites + summaryWrites + ledgerWrites) * p.dynamoWrite +
      replicated * p.dynamoReplicatedWrite +
      budgetReads * p.dynamoRead,
    `leases ${Math.round(leaseWrites / 1e6)} M, summaries ${Math.round(summaryWrites / 1e6)} M, ledger ${Math.round(ledgerWrites / 1e6)} M writes; ${Math.round(replicated / 1e6)} M replicated to ${regions - 1} other region(s)`,
  );
}

/** VPC endpoints, CloudWatch alarms and metrics, KMS. */
function networkAndMonitoringCosts(d: RegionDescription, add: AddCost): void {
  const p = unitPrices;
  const pacer = d.settings.pacer;
  const fn = d.functions;
  const endpoints = regionEndpoints(d);
  const interfaces = new Set<string>([...endpoints.interface, 'ssm', 'elasticache']);
  add(
    'VPC interface endpoints',
    interfaces.size * AZS * p.interfaceEndpointAzHour * HOURS_PER_MONTH,
    `${[...interfaces].sort().join(', ')} × ${AZS} AZs (gateway endpoints ${endpoints.gateway.join(', ')}: free)`,
  );
  const alarms = pacerAlarmSpecs(pacer).length + Object.keys(fn).length * 4;
  // Function-wide delivery bands: watched, behind, ahead and behind per reason.
  const deliveryMetrics = 3 + BEHIND_REASONS.length;
  const metrics = pacer.shards * 6 + 20 + deliveryMetrics;
  add(
    'CloudWatch alarms and metrics',
    alarms * p.alarmMonth + metrics * p.customMetricMonth,
    `${alarms} alarms, ~${metrics} custom metrics (per shard: leader, parameter age, tick, skips, top campaigns; ${deliveryMetrics} delivery bands)`,
  );
  add('KMS', p.kmsKeyMonth, 'one customer-managed key (requests: DynamoDB and Kinesis cache data keys)');
}

/** The cost of one region of `regions` in all, from its description and the traffic assumption. */
export function regionCost(
  region: string,
  d: RegionDescription,
  regions: number,
  traffic: TrafficAssumption = defaultTraffic,
): RegionCost {
  const pacer = d.settings.pacer;
  const lines: CostLine[] = [];
  const add: AddCost = (item, monthlyUsd, basis) =>
    lines.push({ item, monthlyUsd: Math.round(monthlyUsd * 100) / 100, basis });
  lambdaCosts(d, traffic, add);
  cacheCost(d, add);
  streamCost(d, traffic, add);
  dynamoCost(d, traffic, regions, add);
  networkAndMonitoringCosts(d, add);
  const totalUsd = Math.round(lines.reduce((s, l) => s + l.monthlyUsd, 0) * 100) / 100;
  return { region, shards: pacer.shards, instancesPerShard: pacer.instancesPerShard, lines, totalUsd };
}

function table(c: RegionCost, traffic: TrafficAssumption): string {
  const usd = (n: number) =>
    `$${n.toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 })}`;
  const rows = c.lines.map((l) => `| ${l.item} | ${usd(l.monthlyUsd)} | ${l.basis} |`);
  return [
    `### ${c.region}: ${c.shards} pacer shards × ${c.instancesPerShard} instances (${traffic.actionsPerSec} actions/s, ${traffic.noticesPerSec} notices/s, win rate ${traffic.winRate})`,
    '',
    '| item | per month | what is counted |',
    '| --- | ---: | --- |',
    ...rows,
    `| **total** | **${usd(c.totalUsd)}** | |`,
    '',
  ].join('\n');
}

function main(): void {
  const { values } = parseArgs({
    options: {
      shards: { type: 'string' },
      'actions-per-sec': { type: 'string' },
      'notices-per-sec': { type: 'string' },
      'win-rate': { type: 'string' },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    console.log(
      'usage: npm run cost -- [--shards N] [--actions-per-sec N] [--notices-per-sec N] [--win-rate R] [--json]\n' +
        "Monthly cost per region from cdk.json's layout (and from 256 shards unless --shards is given).",
    );
    return;
  }
  const number = (name: string, raw: string | undefined, fallback: number, min: number, max: number) => {
    if (raw === undefined) return fallback;
    const n = Number(raw);
    if (!Number.isFinite(n) || n < min || n > max) {
      console.error(`--${name} ${raw}: give a number from ${min} to ${max}.`);
      process.exit(2);
    }
    return n;
  };
  const traffic: TrafficAssumption = {
    ...defaultTraffic,
    actionsPerSec: number('actions-per-sec', values['actions-per-sec'], defaultTraffic.actionsPerSec, 0, 1e7),
    noticesPerSec: number('notices-per-sec', values['notices-per-sec'], defaultTraffic.noticesPerSec, 0, 1e7),
    winRate: number('win-rate', values['win-rate'], defaultTraffic.winRate, 0, 1),
  };
  const context = (
    JSON.parse(readFileSync(new URL('../cdk.json', import.meta.url), 'utf8')) as {
      context: Record<string, unknown>;
    }
  ).context;
  const deployment = deploymentSettings((key) => context[key]);
  const layouts: (number | undefined)[] = values.shards
    ? [number('shards', values.shards, 24, 1, 256)]
    : [undefined, 256];
  const out: RegionCost[] = [];
  for (const shards of layouts) {
    for (const deployed of deployment.regions as DeployedRegion[]) {
      const d =
        shards === undefined
          ? deployed.description
          : regionDescription({ ...deployed.settings, pacer: { ...deployed.settings.pacer, shards } });
      out.push(regionCost(deployed.region, d, deployment.regions.length, traffic));
    }
  }
  if (values.json) console.log(JSON.stringify({ traffic, prices: unitPrices, regions: out }));
  else for (const c of out) console.log(table(c, traffic));
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop() ?? '')) main();
