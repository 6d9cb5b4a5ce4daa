/**
 * The pacer's settings in a region and what is derived from them: its function (schedule
 * instances, environment), its parameters (shard count, leader overrides) and the names both use.
 */
import { isTimeZone } from '../budget/time-zone.js';
import { invocationWindowMs } from '../pacing/invocation.js';
import { InvalidPacerSettingsError } from './region-settings.js';
import type { FunctionSpec, ParameterSpec } from './resource-specs.js';

/**
 * The pacer's layout and cadence in a region: typed settings, not constants. The schedule
 * instances (one EventBridge rule per shard × instance), the per-shard leader-override parameters
 * and the pacer's environment are all derived from them, by the CDK stack and the local runner
 * alike ({@link regionDescription}).
 */
/** The auction kinds a region's pacer can be set for ({@link PacerSettings.auction}). */
export const AUCTION_KINDS = ['first-price', 'second-price'] as const;
/** One of {@link AUCTION_KINDS}. */
export type AuctionKind = (typeof AUCTION_KINDS)[number];

export interface PacerSettings {
  /**
   * Shards N: an account belongs to shard fnv1a32(utf8(accountId)) mod N. Changing N needs the
   * re-shard procedure of docs/pacing.md (budget items carry their shard). @default 24
   */
  readonly shards: number;
  /** Instances per shard: all compute every tick, one publishes. @default 3 */
  readonly instancesPerShard: number;
  /** Tick length, ms (parameters are recomputed and published every tick). @default 10_000 */
  readonly tickMs: number;
  /**
   * Lease time-to-live, ms: a dead leader is replaced within this plus one tick. At least two
   * ticks, so one slow tick does not lose the lease. @default 25_000
   */
  readonly leaseTtlMs: number;
  /**
   * The schedule period an invocation covers, ms: EventBridge's minute. Only the local runner
   * lowers it (with the scheduler's `msPerMinute`) so tests run a "minute" of ticks fast.
   * @default 60_000
   */
  readonly minuteMs: number;
  /**
   * The auction the region's exchanges run, which sets the elasticity κ the controller assumes
   * for spend against the bid multiplier (docs/pacing.md, "Actuators"): `first-price` κ = 2,
   * `second-price` κ = 1 (stable in both kinds of market, the safe default). @default 'second-price'
   */
  readonly auction: AuctionKind;
  /**
   * The IANA time zone the region's audience lives in: the built-in traffic shape a plan starts
   * from when nothing has been learned anywhere in the region (its first day) is this zone's day,
   * moved through UTC to each plan's own hours (docs/pacing.md, "Prior for new plans"). Absent:
   * each plan's own zone (right when advertisers and audience share a zone).
   * @default none
   */
  readonly audienceTimeZone?: string;
  /**
   * The pacer function's memory, MB (Lambda gives CPU in proportion: 1,769 MB is one vCPU).
   * Deployment only (the pacer's own environment does not carry it). @default {@link DEFAULT_PACER_MEMORY_MB}
   */
  readonly memoryMb?: number;
  /**
   * Concurrent executions reserved for the pacer: at least shards × instancesPerShard (each
   * instance runs about a minute every minute). Deployment only. @default none (unreserved)
   */
  readonly reservedConcurrency?: number;
}

/**
 * The pacer's default memory, MB: the largest peak measured for one pacer over a cold takeover and
 * steady ticks at 100,000 campaigns (`pacerPeakRssMb`, 2,184 MiB) with 30 % headroom, rounded up
 * to 64 MB; it also gives more than the full vCPU (1,769 MB) the cold and takeover ticks need to
 * fit in a 10 s tick (docs/operations.md, "Pacer memory").
 */
export const DEFAULT_PACER_MEMORY_MB = 2880;

/** The pacer in AWS: 24 shards × 3 instances, 10 s ticks (the seed's layout). */
export const defaultPacerSettings: PacerSettings = {
  shards: 24,
  instancesPerShard: 3,
  tickMs: 10_000,
  leaseTtlMs: 25_000,
  minuteMs: 60_000,
  auction: 'second-price',
  memoryMb: DEFAULT_PACER_MEMORY_MB,
};

/** The local runner's default: 4 shards × 3 instances (12 processes per region instead of 72). */
export const localPacerSettings: PacerSettings = { ...defaultPacerSettings, shards: 4 };

/** Validates pacer settings (whole numbers, ticks dividing the minute, a lease of ≥ 2 ticks). */
export function validatePacerSettings(s: PacerSettings): PacerSettings {
  const whole = (name: string, v: number, min: number, max: number) => {
    if (!Number.isSafeInteger(v) || v < min || v > max)
      throw new InvalidPacerSettingsError(
        `pacer ${name} = ${v}: give a whole number from ${min} to ${max}.`,
        `pacer.${name}`,
      );
  };
  whole('shards', s.shards, 1, 256);
  whole('instancesPerShard', s.instancesPerShard, 1, 9);
  whole('tickMs', s.tickMs, 100, 60_000);
  whole('minuteMs', s.minuteMs, s.tickMs, 3_600_000);
  whole('leaseTtlMs', s.leaseTtlMs, 2 * s.tickMs, 600_000);
  if (!(AUCTION_KINDS as readonly string[]).includes(s.auction))
    throw new InvalidPacerSettingsError(
      `pacer auction = ${JSON.stringify(s.auction)}: give ${AUCTION_KINDS.join(' or ')} (the auction the region's exchanges run).`,
      'pacer.auction',
    );
  if (s.audienceTimeZone !== undefined && !isTimeZone(s.audienceTimeZone))
    throw new InvalidPacerSettingsError(
      `pacer audienceTimeZone = ${JSON.stringify(s.audienceTimeZone)}: give an IANA time zone such as America/New_York, or leave it out.`,
      'pacer.audienceTimeZone',
    );
  if (s.minuteMs % s.tickMs !== 0)
    throw new InvalidPacerSettingsError(
      `pacer tickMs ${s.tickMs} must divide minuteMs ${s.minuteMs}: ticks sit on wall-clock boundaries.`,
      'pacer.tickMs',
    );
  // Lambda's memory range.
  if (s.memoryMb !== undefined) whole('memoryMb', s.memoryMb, 128, 10_240);
  if (s.reservedConcurrency !== undefined) {
    const instances = s.shards * s.instancesPerShard;
    if (!Number.isSafeInteger(s.reservedConcurrency) || s.reservedConcurrency < instances)
      throw new InvalidPacerSettingsError(
        `pacer reservedConcurrency = ${s.reservedConcurrency}: give a whole number of at least shards × instancesPerShard = ${instances} ` +
          '(each instance runs about a minute every minute; fewer leaves instances throttled), or leave it out.',
        'pacer.reservedConcurrency',
      );
  }
  return s;
}

/** Environment variables carrying {@link PacerSettings} into the pacer (and printed for the CLI). */
export const pacerEnv = {
  shards: 'PACER_SHARDS',
  instancesPerShard: 'PACER_INSTANCES_PER_SHARD',
  tickMs: 'PACER_TICK_MS',
  leaseTtlMs: 'PACER_LEASE_TTL_MS',
  minuteMs: 'PACER_MINUTE_MS',
  auction: 'PACER_AUCTION',
  audienceTimeZone: 'PACER_AUDIENCE_TIME_ZONE',
} as const satisfies Record<Exclude<keyof PacerSettings, 'memoryMb' | 'reservedConcurrency'>, string>;

/** Id of a pacer instance, as in its rule name and lease holder: `s<shard>-i<instance>`. */
export function pacerInstanceId(shard: number, instance: number): string {
  return `s${shard}-i${instance}`;
}

/** The input EventBridge passes to one pacer instance (a type alias: it is also a JSON record). */
export type PacerInput = { readonly shard: number; readonly instance: number };

/** SSM path (below the region prefix) under which every shard's leader override lives. */
export const LEADER_OVERRIDE_PATH_PREFIX = 'pacer/leader-override/';

/** SSM path (below the region prefix) of a shard's leader override: an instance id or `auto`. */
export function leaderOverridePath(shard: number): string {
  return `${LEADER_OVERRIDE_PATH_PREFIX}${shard}`;
}

/** SSM path (below the region prefix) of the shard count N writers must use. */
export const pacerShardsPath = 'pacer/shards';

/** Leader-override value meaning "the lease holder publishes". */
export const AUTO_LEADER = 'auto';

/**
 * The pacer's V8 flags. A takeover tick allocates several hundred MB of short-lived objects (the
 * reload's replies, decoded states, encoded fields) inside its 10 s window; with the default
 * 16 MB semi-spaces a third of its CPU was garbage collection (138 scavenges a takeover at 100,000
 * campaigns), much of it copying objects that outlive two scavenges only because their batch is
 * still in flight. 64 MB semi-spaces (a young generation of up to 192 MB, inside the measured
 * peak that sizes `memoryMb`) cut that to 35 scavenges and about two thirds of the time
 * (docs/pacing.md, "Takeover").
 */
export const PACER_NODE_OPTIONS: readonly string[] = ['--max-semi-space-size=64'];

/** The pacer function of settings `s`: one schedule instance per shard × instance. */
export function pacerFunction(s: PacerSettings) {
  const instances: { id: string; input: PacerInput }[] = [];
  for (let shard = 0; shard < s.shards; shard++) {
    for (let instance = 0; instance < s.instancesPerShard; instance++) {
      instances.push({ id: pacerInstanceId(shard, instance), input: { shard, instance } });
    }
  }
  return {
    name: 'pacer',
    entry: 'functions/pacer/handler.ts',
    // docs/operations.md, "Pacer memory": measured peak RSS at 100,000 campaigns, with headroom.
    memoryMb: s.memoryMb ?? DEFAULT_PACER_MEMORY_MB,
    nodeOptions: PACER_NODE_OPTIONS,
    ...(s.reservedConcurrency === undefined ? {} : { reservedConcurrency: s.reservedConcurrency }),
    // An invocation's window (a minute, the delivery-delay overlap and the tick it starts in:
    // 90 s in AWS), plus 15 s for its last tick to finish (docs/pacing.md, "Cadence").
    timeoutSeconds: Math.ceil((invocationWindowMs(s.tickMs, s.minuteMs) + 15_000) / 1000),
    schedule: { rateMinutes: 1, instances },
    // budgets: the flight closer records each flight day's spend on its plan (docs/spend.md, "Flights").
    tables: { budgets: 'readwrite', leases: 'readwrite', regionSpend: 'readwrite', spendLedger: 'read' },
    writesStreams: [],
    usesRedis: true,
    settings: {
      [pacerEnv.shards]: String(s.shards),
      [pacerEnv.instancesPerShard]: String(s.instancesPerShard),
      [pacerEnv.tickMs]: String(s.tickMs),
      [pacerEnv.leaseTtlMs]: String(s.leaseTtlMs),
      [pacerEnv.minuteMs]: String(s.minuteMs),
      [pacerEnv.auction]: s.auction,
      ...(s.audienceTimeZone === undefined ? {} : { [pacerEnv.audienceTimeZone]: s.audienceTimeZone }),
    },
    readsParameters: true,
    purpose: 'Scheduled shard pacer: computes pacing parameters every tick, the lease holder publishes them.',
  } as const satisfies FunctionSpec;
}

/** Parameters derived from the pacer settings: N for writers, one leader override per shard. */
export function pacerParameters(s: PacerSettings): Record<string, ParameterSpec> {
  const out: Record<string, ParameterSpec> = {
    pacerShards: {
      path: pacerShardsPath,
      initial: () => String(s.shards),
      purpose:
        'Pacer shard count N: writers of the budgets table tag items with shard = fnv1a32(account) mod N.',
    },
  };
  for (let shard = 0; shard < s.shards; shard++) {
    out[`pacerLeaderOverride${shard}`] = {
      path: leaderOverridePath(shard),
      initial: () => AUTO_LEADER,
      purpose: `Leader override of pacer shard ${shard}: an instance id (e.g. ${pacerInstanceId(shard, 0)}) publishes, or auto (the lease holder).`,
    };
  }
  return out;
}
