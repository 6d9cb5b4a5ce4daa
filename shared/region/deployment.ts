/**
 * The deployment's settings — which regions, which one is primary, and each region's pacer,
 * cache, stream and network settings — read from `cdk.json` context in ONE typed, validated
 * place. The CDK app (`cdk/app.ts`) is the only caller; each region's settings then feed
 * {@link regionDescription}, which derives everything else.
 *
 * Context keys (all under `paceline:`; `-c key=value` on the command line overrides cdk.json):
 *
 * - `paceline:account` — the 12-digit AWS account.
 * - `paceline:regions` — an object `{ "<region>": RegionEntry }` (or a plain list of region names,
 *   every region on the defaults). A RegionEntry holds optional `pacer`, `cache`, `streams`
 *   (see {@link RegionSettingsInput}) and `network`: `cidr` (the VPC's, non-overlapping across
 *   regions; required with several regions), `vpcId` (filled after the first deploy, so earlier
 *   regions can request peering), `peering` (`{ "<peer region>": "pcx-…" }`, the peering
 *   connections a later region routes through) and `endpoints` (`{ "ssm": { "dnsName",
 *   "hostedZoneId" }, "elasticache": { … } }`: the region's own SSM and ElastiCache interface
 *   endpoints, filled after the first deploy, so peer regions' pacers can resolve this region's
 *   APIs to them over the peering; docs/operations.md, "Network between regions").
 * - `paceline:primaryRegion` — the region whose stack owns the global tables. @default the first
 * - `paceline:defaults` — `pacer` / `cache` / `streams` applied to every region before its own.
 * - `paceline:pacerShards`, `paceline:pacerInstancesPerShard` — command-line shorthands that
 *   override the pacer layout of every region (docs/pacing.md, "Changing N").
 * - `paceline:stage` — a stage name prefixing every physical name (shared/region/names.ts), so
 *   two deployments fit one account and region. @default none: the default names
 * - `paceline:alarms` — `{ "subscriptions": [{ "kind": "email" | "sms" | "https" | "sqs" |
 *   "lambda", "endpoint": … }] }`: who every region's alarm topic notifies.
 *
 * Every error names the bad key and what to give instead.
 */
import { type AlarmSubscription, parseAlarms } from './deployment-alarms.js';
import { InvalidDeploymentSettingsError, isObject, only, wholeNumber } from './deployment-input.js';
import { parseCidr, parseNetwork, type RegionNetwork } from './deployment-network.js';
import { InvalidStageError, validateStage } from './names.js';
import {
  AUCTION_KINDS,
  type AuctionKind,
  type CacheSettings,
  InvalidRegionSettingsError,
  type PacerSettings,
  type RegionDescription,
  type RegionSettingsInput,
  regionDescription,
  type StreamKey,
  type StreamSettingsInput,
  type StreamSizing,
} from './resources.js';

export {
  ALARM_SUBSCRIPTION_KINDS,
  type AlarmSubscription,
  type AlarmSubscriptionKind,
} from './deployment-alarms.js';
export { InvalidDeploymentSettingsError } from './deployment-input.js';
export {
  type EndpointAlias,
  PEER_ENDPOINT_SERVICES,
  type PeerEndpointService,
  type RegionNetwork,
} from './deployment-network.js';

/** One region of the deployment. */
export interface DeployedRegion {
  readonly region: string;
  /** The region's settings as given (merged with the defaults). */
  readonly settings: RegionSettingsInput;
  /** The region description derived from them (validated). */
  readonly description: RegionDescription;
  readonly network: RegionNetwork;
}

/** The whole deployment. */
export interface DeploymentSettings {
  readonly account: string;
  /** Owns the global tables (TableV2 with a replica in every other region). */
  readonly primaryRegion: string;
  readonly regions: readonly DeployedRegion[];
  /** The stage prefixing every physical name. @default none: the default names */
  readonly stage?: string;
  /** Subscriptions of every region's alarm topic. @default none */
  readonly alarmSubscriptions: readonly AlarmSubscription[];
}

type Lookup = (key: string) => unknown;

const REGION = /^[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-\d$/;

const pacerKeys = [
  'shards',
  'instancesPerShard',
  'tickMs',
  'leaseTtlMs',
  'memoryMb',
  'reservedConcurrency',
] as const;
const streamKeys = ['actions', 'spend'] as const satisfies readonly StreamKey[];
const sizingKeys = ['shards', 'parallelizationFactor'] as const satisfies readonly (keyof StreamSizing)[];
const cacheKeys = ['nodeType', 'shards', 'replicasPerShard'] as const;

function parseSettings(key: string, raw: unknown): RegionSettingsInput {
  if (raw === undefined) return {};
  if (!isObject(raw)) throw new InvalidDeploymentSettingsError(key, 'give an object.');
  only(key, raw, ['pacer', 'cache', 'streams', 'network']);
  const out: {
    pacer?: Partial<PacerSettings>;
    cache?: Partial<CacheSettings>;
    streams?: StreamSettingsInput;
  } = {};
  if (raw.pacer !== undefined) {
    if (!isObject(raw.pacer)) throw new InvalidDeploymentSettingsError(`${key}.pacer`, 'give an object.');
    only(`${key}.pacer`, raw.pacer, [...pacerKeys, 'auction', 'audienceTimeZone']);
    const pacer: Partial<Record<(typeof pacerKeys)[number], number>> & {
      auction?: AuctionKind;
      audienceTimeZone?: string;
    } = {};
    for (const k of pacerKeys)
      if (raw.pacer[k] !== undefined) pacer[k] = wholeNumber(`${key}.pacer.${k}`, raw.pacer[k]);
    const auction = raw.pacer.auction;
    if (auction !== undefined) {
      if (!(AUCTION_KINDS as readonly unknown[]).includes(auction))
        throw new InvalidDeploymentSettingsError(
          `${key}.pacer.auction`,
          `${JSON.stringify(auction)} is not an auction kind: give ${AUCTION_KINDS.join(' or ')}.`,
        );
      pacer.auction = auction as AuctionKind;
    }
    const audience = raw.pacer.audienceTimeZone;
    if (audience !== undefined) {
      if (typeof audience !== 'string')
        throw new InvalidDeploymentSettingsError(
          `${key}.pacer.audienceTimeZone`,
          'give an IANA time zone such as America/New_York.',
        );
      pacer.audienceTimeZone = audience;
    }
    out.pacer = pacer;
  }
  if (raw.cache !== undefined) {
    if (!isObject(raw.cache)) throw new InvalidDeploymentSettingsError(`${key}.cache`, 'give an object.');
    only(`${key}.cache`, raw.cache, cacheKeys);
    const cache: { nodeType?: string; shards?: number; replicasPerShard?: number } = {};
    if (raw.cache.nodeType !== undefined) {
      if (typeof raw.cache.nodeType !== 'string')
        throw new InvalidDeploymentSettingsError(
          `${key}.cache.nodeType`,
          'give a node type such as cache.r7g.large.',
        );
      cache.nodeType = raw.cache.nodeType;
    }
    if (raw.cache.shards !== undefined) cache.shards = wholeNumber(`${key}.cache.shards`, raw.cache.shards);
    if (raw.cache.replicasPerShard !== undefined)
      cache.replicasPerShard = wholeNumber(`${key}.cache.replicasPerShard`, raw.cache.replicasPerShard);
    out.cache = cache;
  }
  if (raw.streams !== undefined) {
    out.streams = parseStreams(`${key}.streams`, raw.streams);
  }
  return out;
}

function parseStreams(key: string, raw: unknown): StreamSettingsInput {
  if (!isObject(raw)) throw new InvalidDeploymentSettingsError(key, 'give an object.');
  only(key, raw, ['capacityMode', ...streamKeys]);
  const out: { capacityMode?: 'provisioned' | 'on-demand' } & { [K in StreamKey]?: Partial<StreamSizing> } =
    {};
  if (raw.capacityMode !== undefined) {
    const mode = raw.capacityMode;
    if (mode !== 'provisioned' && mode !== 'on-demand')
      throw new InvalidDeploymentSettingsError(
        `${key}.capacityMode`,
        `${JSON.stringify(mode)}: give "provisioned" or "on-demand".`,
      );
    out.capacityMode = mode;
  }
  for (const stream of streamKeys) {
    const v = raw[stream];
    if (v === undefined) continue;
    if (!isObject(v))
      throw new InvalidDeploymentSettingsError(
        `${key}.${stream}`,
        'give { "shards": N, "parallelizationFactor": 1..10 }.',
      );
    only(`${key}.${stream}`, v, sizingKeys);
    const sizing: { -readonly [K in keyof StreamSizing]?: number } = {};
    for (const k of sizingKeys)
      if (v[k] !== undefined) sizing[k] = wholeNumber(`${key}.${stream}.${k}`, v[k]);
    out[stream] = sizing;
  }
  return out;
}

function merge(a: RegionSettingsInput, b: RegionSettingsInput): RegionSettingsInput {
  const streams: Record<string, unknown> = { ...a.streams, ...b.streams };
  for (const k of streamKeys)
    if (a.streams?.[k] || b.streams?.[k]) streams[k] = { ...a.streams?.[k], ...b.streams?.[k] };
  return {
    pacer: { ...a.pacer, ...b.pacer },
    cache: { ...a.cache, ...b.cache },
    streams: streams as StreamSettingsInput,
  };
}

/** Reads a dotted path (`pacer.shards`) of parsed settings. */
function at(settings: RegionSettingsInput, path: string): unknown {
  return path.split('.').reduce<unknown>((v, k) => (isObject(v) ? v[k] : undefined), settings);
}

/**
 * Reads and validates the deployment from context (`lookup` = `app.node.tryGetContext`).
 * @throws InvalidDeploymentSettingsError naming the key that is wrong.
 */
export function deploymentSettings(rawLookup: Lookup): DeploymentSettings {
  // `-c key=value` gives strings: a JSON object or list there is parsed (e.g.
  // `-c 'paceline:defaults={"cache":{"shards":6}}'`).
  const lookup: Lookup = (key) => {
    const v = rawLookup(key);
    if (typeof v !== 'string' || !/^\s*[[{]/.test(v)) return v;
    try {
      return JSON.parse(v) as unknown;
    } catch (error) {
      throw new InvalidDeploymentSettingsError(key, `not valid JSON: ${(error as Error).message}`, {
        cause: error,
      });
    }
  };
  const account = String(lookup('paceline:account') ?? '');
  if (!/^\d{12}$/.test(account))
    throw new InvalidDeploymentSettingsError(
      'paceline:account',
      `${JSON.stringify(account)}: give the 12-digit AWS account id.`,
    );
  const rawRegions = lookup('paceline:regions');
  let entries: [string, unknown][];
  if (Array.isArray(rawRegions)) entries = rawRegions.map((r) => [String(r), undefined]);
  else if (isObject(rawRegions)) entries = Object.entries(rawRegions);
  else
    throw new InvalidDeploymentSettingsError(
      'paceline:regions',
      'give { "us-east-1": { "network": { "cidr": "10.20.0.0/16" } }, … } (or a list of region names).',
    );
  if (entries.length === 0)
    throw new InvalidDeploymentSettingsError('paceline:regions', 'name at least one region.');
  const names = entries.map(([r]) => r);
  for (const r of names)
    if (!REGION.test(r))
      throw new InvalidDeploymentSettingsError(`paceline:regions.${r}`, 'not an AWS region name.');
  const primaryRegion = String(lookup('paceline:primaryRegion') ?? names[0]);
  if (!names.includes(primaryRegion))
    throw new InvalidDeploymentSettingsError(
      'paceline:primaryRegion',
      `${primaryRegion} is not one of paceline:regions (${names.join(', ')}).`,
    );
  const defaults = parseSettings('paceline:defaults', lookup('paceline:defaults'));
  if (
    isObject(lookup('paceline:defaults')) &&
    (lookup('paceline:defaults') as Record<string, unknown>).network
  )
    throw new InvalidDeploymentSettingsError(
      'paceline:defaults.network',
      'networks are per region: set it under paceline:regions.<region>.network.',
    );
  const overrides: { -readonly [K in (typeof shorthandOf)[keyof typeof shorthandOf]]?: number } = {};
  for (const [ctx, field] of Object.entries(shorthandOf)) {
    const v = lookup(ctx);
    if (v !== undefined) overrides[field] = wholeNumber(ctx, v);
  }
  const rawStage = lookup('paceline:stage');
  let stage: string | undefined;
  if (rawStage !== undefined) {
    try {
      stage = validateStage(typeof rawStage === 'string' ? rawStage : JSON.stringify(rawStage));
    } catch (error) {
      if (error instanceof InvalidStageError)
        throw new InvalidDeploymentSettingsError('paceline:stage', error.message, { cause: error });
      throw error;
    }
  }
  const alarmSubscriptions = parseAlarms('paceline:alarms', lookup('paceline:alarms'));
  const several = entries.length > 1;
  const regions = entries.map(([region, raw]): DeployedRegion => {
    const key = `paceline:regions.${region}`;
    const own = parseSettings(key, raw);
    const settings = { ...merge(merge(defaults, own), { pacer: overrides }), ...(stage ? { stage } : {}) };
    let description: RegionDescription;
    try {
      description = regionDescription(settings);
    } catch (error) {
      if (error instanceof InvalidRegionSettingsError) {
        // Name the key the bad value came from: a -c shorthand, the region's own entry, the defaults.
        const shorthand = Object.entries(shorthandOf).find(
          ([, field]) => `pacer.${field}` === error.setting,
        )?.[0];
        const source = !error.setting
          ? key
          : shorthand && at({ pacer: overrides }, error.setting) !== undefined
            ? shorthand
            : at(own, error.setting) !== undefined
              ? `${key}.${error.setting}`
              : at(defaults, error.setting) !== undefined
                ? `paceline:defaults.${error.setting}`
                : key;
        throw new InvalidDeploymentSettingsError(source, error.message, { cause: error });
      }
      throw error;
    }
    const network = parseNetwork(
      `${key}.network`,
      isObject(raw) ? raw.network : undefined,
      several,
      names,
      region,
    );
    return { region, settings, description, network };
  });
  // VPC CIDRs must not overlap: peered VPCs route by destination CIDR.
  for (let i = 0; i < regions.length; i++) {
    for (let j = i + 1; j < regions.length; j++) {
      const a = regions[i] as DeployedRegion;
      const b = regions[j] as DeployedRegion;
      const [ab, ap] = parseCidr('', a.network.cidr);
      const [bb, bp] = parseCidr('', b.network.cidr);
      const size = 2 ** (32 - Math.min(ap, bp));
      if (Math.floor(ab / size) === Math.floor(bb / size))
        throw new InvalidDeploymentSettingsError(
          `paceline:regions.${b.region}.network.cidr`,
          `${b.network.cidr} overlaps ${a.region}'s ${a.network.cidr}: peered VPCs need disjoint CIDRs.`,
        );
    }
  }
  return { account, primaryRegion, regions, ...(stage ? { stage } : {}), alarmSubscriptions };
}

/** The `-c` shorthands and the pacer setting each overrides in every region. */
const shorthandOf: Record<string, 'shards' | 'instancesPerShard'> = {
  'paceline:pacerShards': 'shards',
  'paceline:pacerInstancesPerShard': 'instancesPerShard',
};
