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
import { inputErrorKind } from '../errors.js';
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

/**
 * The AWS APIs a peer region's pacer calls in this region (the publisher switch in SSM,
 * DescribeReplicationGroups for cache discovery), reached through this region's interface
 * endpoints over the peering: each peer resolves `<service>.<region>.amazonaws.com` to them.
 */
export const PEER_ENDPOINT_SERVICES = ['ssm', 'elasticache'] as const;
/** One of {@link PEER_ENDPOINT_SERVICES}. */
export type PeerEndpointService = (typeof PEER_ENDPOINT_SERVICES)[number];

/**
 * An interface endpoint's regional DNS name and the hosted zone id Route 53 aliases it by (the
 * first of the endpoint's `DnsEntries`, `<hostedZoneId>:<dnsName>`), as a Route 53 alias target.
 */
export interface EndpointAlias {
  /** e.g. `vpce-0123456789abcdef0-abcd1234.ssm.us-west-2.vpce.amazonaws.com` */
  readonly dnsName: string;
  /** e.g. `Z1YSA3EXCYUU9Z` (the endpoint's, not a zone of the account) */
  readonly hostedZoneId: string;
}

/** A region's network settings. */
export interface RegionNetwork {
  /** The VPC's IPv4 CIDR (a /16 … /24), distinct from every other region's. */
  readonly cidr: string;
  /** The deployed VPC's id, once known (lets earlier regions request a peering). @default none */
  readonly vpcId?: string;
  /** Peering connections to earlier regions, by region, once they exist. @default none */
  readonly peering: Readonly<Record<string, string>>;
  /**
   * This region's own interface endpoints peers resolve its APIs to, once deployed (published in
   * SSM `/paceline/<region>/network/endpoints/<service>`). Given: this region's endpoints admit
   * the peer CIDRs on 443 and every peer region's stack creates the private hosted zone
   * `<service>.<region>.amazonaws.com` aliased to it. @default none
   */
  readonly endpoints: Readonly<Partial<Record<PeerEndpointService, EndpointAlias>>>;
}

/** One region of the deployment. */
export interface DeployedRegion {
  readonly region: string;
  /** The region's settings as given (merged with the defaults). */
  readonly settings: RegionSettingsInput;
  /** The region description derived from them (validated). */
  readonly description: RegionDescription;
  readonly network: RegionNetwork;
}

/** Kinds of alarm subscription (SNS protocols). */
export const ALARM_SUBSCRIPTION_KINDS = ['email', 'sms', 'https', 'sqs', 'lambda'] as const;
/** One of {@link ALARM_SUBSCRIPTION_KINDS}. */
export type AlarmSubscriptionKind = (typeof ALARM_SUBSCRIPTION_KINDS)[number];

/** Who the alarm topic notifies: an address, phone number, URL, queue or function. */
export interface AlarmSubscription {
  readonly kind: AlarmSubscriptionKind;
  /** An email address, an E.164 phone number, an https URL, an SQS queue ARN or a Lambda function ARN. */
  readonly endpoint: string;
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

/** A context value that cannot work; the message names the key. */
export class InvalidDeploymentSettingsError extends inputErrorKind(
  'InvalidDeploymentSettingsError',
  'region.invalid-deployment-settings',
  'key',
  (key) => `cdk.json context ${key}: `,
) {}

type Lookup = (key: string) => unknown;

const REGION = /^[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-\d$/;

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** A whole number from a number or a numeric string (`-c` values are strings). */
function wholeNumber(key: string, v: unknown): number {
  const n = typeof v === 'string' && v.trim() !== '' ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isSafeInteger(n))
    throw new InvalidDeploymentSettingsError(key, `${JSON.stringify(v)} is not a whole number.`);
  return n;
}

function only(key: string, v: Record<string, unknown>, allowed: readonly string[]): void {
  for (const k of Object.keys(v)) {
    if (!allowed.includes(k))
      throw new InvalidDeploymentSettingsError(
        `${key}.${k}`,
        `unknown setting (allowed: ${allowed.join(', ')}).`,
      );
  }
}

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

function parseAlarms(key: string, raw: unknown): AlarmSubscription[] {
  if (raw === undefined) return [];
  if (!isObject(raw))
    throw new InvalidDeploymentSettingsError(
      key,
      'give { "subscriptions": [{ "kind": "email", "endpoint": "ops@example.com" }] }.',
    );
  only(key, raw, ['subscriptions']);
  const list = raw.subscriptions ?? [];
  if (!Array.isArray(list))
    throw new InvalidDeploymentSettingsError(
      `${key}.subscriptions`,
      'give a list of { "kind", "endpoint" }.',
    );
  return list.map((entry: unknown, i) => {
    const at = `${key}.subscriptions[${i}]`;
    if (!isObject(entry)) throw new InvalidDeploymentSettingsError(at, 'give { "kind": …, "endpoint": … }.');
    only(at, entry, ['kind', 'endpoint']);
    const kind = entry.kind;
    if (!ALARM_SUBSCRIPTION_KINDS.includes(kind as AlarmSubscriptionKind))
      throw new InvalidDeploymentSettingsError(
        `${at}.kind`,
        `${JSON.stringify(kind)}: give one of ${ALARM_SUBSCRIPTION_KINDS.join(', ')}.`,
      );
    const endpoint = entry.endpoint;
    const rule = subscriptionEndpoint[kind as AlarmSubscriptionKind];
    if (typeof endpoint !== 'string' || !rule.pattern.test(endpoint))
      throw new InvalidDeploymentSettingsError(
        `${at}.endpoint`,
        `${JSON.stringify(endpoint)}: give ${rule.what}.`,
      );
    return { kind: kind as AlarmSubscriptionKind, endpoint };
  });
}

/** What each kind of subscription's endpoint must look like. */
const subscriptionEndpoint: Record<AlarmSubscriptionKind, { pattern: RegExp; what: string }> = {
  email: { pattern: /^[^@\s]+@[^@\s]+\.[^@\s]+$/, what: 'an email address' },
  sms: { pattern: /^\+[1-9]\d{6,14}$/, what: 'a phone number in E.164 form, e.g. +14155550100' },
  https: { pattern: /^https:\/\/[^\s/]+(\/\S*)?$/, what: 'an https:// URL' },
  sqs: {
    pattern: /^arn:aws[a-z-]*:sqs:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,80}$/,
    what: 'an SQS queue ARN (arn:aws:sqs:<region>:<account>:<name>; FIFO queues cannot subscribe to this topic)',
  },
  lambda: {
    pattern: /^arn:aws[a-z-]*:lambda:[a-z0-9-]+:\d{12}:function:[A-Za-z0-9_-]{1,64}(:[A-Za-z0-9$_-]+)?$/,
    what: 'a Lambda function ARN (arn:aws:lambda:<region>:<account>:function:<name>)',
  },
};

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

/** Parses `a.b.c.d/n` into [first address as an integer, prefix length]. */
function parseCidr(key: string, v: unknown): [number, number] {
  const m = typeof v === 'string' ? /^(\d+)\.(\d+)\.(\d+)\.(\d+)\/(\d+)$/.exec(v) : null;
  const parts = m ? m.slice(1, 5).map(Number) : [];
  const prefix = m ? Number(m[5]) : Number.NaN;
  if (!m || parts.some((p) => p > 255) || prefix < 16 || prefix > 24)
    throw new InvalidDeploymentSettingsError(
      key,
      `${JSON.stringify(v)}: give an IPv4 CIDR from /16 to /24, e.g. 10.20.0.0/16.`,
    );
  const base = parts.reduce((acc, p) => acc * 256 + p, 0);
  if (base % 2 ** (32 - prefix) !== 0)
    throw new InvalidDeploymentSettingsError(key, `${v} has host bits set: use the network address.`);
  return [base, prefix];
}

function parseNetwork(
  key: string,
  raw: unknown,
  several: boolean,
  regions: readonly string[],
  region: string,
): RegionNetwork {
  if (raw === undefined && !several) return { cidr: '10.20.0.0/16', peering: {}, endpoints: {} };
  if (!isObject(raw))
    throw new InvalidDeploymentSettingsError(
      key,
      'give { "cidr": "10.x.0.0/16" } (with several regions every region needs its own, non-overlapping VPC CIDR).',
    );
  only(key, raw, ['cidr', 'vpcId', 'peering', 'endpoints']);
  parseCidr(`${key}.cidr`, raw.cidr);
  if (raw.vpcId !== undefined && (typeof raw.vpcId !== 'string' || !/^vpc-[0-9a-f]{8,17}$/.test(raw.vpcId)))
    throw new InvalidDeploymentSettingsError(
      `${key}.vpcId`,
      `${JSON.stringify(raw.vpcId)}: give a VPC id (vpc-…).`,
    );
  const peering: Record<string, string> = {};
  if (raw.peering !== undefined) {
    if (!isObject(raw.peering))
      throw new InvalidDeploymentSettingsError(`${key}.peering`, 'give { "<region>": "pcx-…" }.');
    for (const [peer, id] of Object.entries(raw.peering)) {
      if (!regions.includes(peer))
        throw new InvalidDeploymentSettingsError(
          `${key}.peering.${peer}`,
          `not a region of paceline:regions (${regions.join(', ')}).`,
        );
      if (typeof id !== 'string' || !/^pcx-[0-9a-f]{8,17}$/.test(id))
        throw new InvalidDeploymentSettingsError(
          `${key}.peering.${peer}`,
          `${JSON.stringify(id)}: give a peering connection id (pcx-…).`,
        );
      peering[peer] = id;
    }
  }
  return {
    cidr: raw.cidr as string,
    ...(raw.vpcId ? { vpcId: raw.vpcId as string } : {}),
    peering,
    endpoints: parseEndpoints(`${key}.endpoints`, raw.endpoints, region),
  };
}

/** What to copy, and from where: every endpoint error ends with it. */
function endpointHint(region: string, service: string): string {
  return (
    `give the value published in SSM /paceline/${region}/network/endpoints/${service} after the first deploy, ` +
    `{ "dnsName": "vpce-….${service}.${region}.vpce.amazonaws.com", "hostedZoneId": "Z…" } ` +
    "(the endpoint's first DnsEntries entry, <hostedZoneId>:<dnsName>), or remove the key."
  );
}

function parseEndpoints(
  key: string,
  raw: unknown,
  region: string,
): Partial<Record<PeerEndpointService, EndpointAlias>> {
  if (raw === undefined) return {};
  if (!isObject(raw))
    throw new InvalidDeploymentSettingsError(
      key,
      `give { "ssm": { "dnsName": …, "hostedZoneId": … }, "elasticache": { … } } (values from SSM /paceline/${region}/network/endpoints/…).`,
    );
  only(key, raw, PEER_ENDPOINT_SERVICES);
  const out: Partial<Record<PeerEndpointService, EndpointAlias>> = {};
  for (const service of PEER_ENDPOINT_SERVICES) {
    const v = raw[service];
    if (v === undefined) continue;
    const at = `${key}.${service}`;
    if (!isObject(v)) throw new InvalidDeploymentSettingsError(at, endpointHint(region, service));
    only(at, v, ['dnsName', 'hostedZoneId']);
    // The regional name of THIS region's endpoint for THIS service (not a zonal name, not another
    // region's or service's endpoint pasted into the wrong key: the alias would resolve, wrongly).
    // Region names are [a-z0-9-] (checked above): nothing to escape.
    const dnsName = new RegExp(
      `^vpce-[0-9a-f]{8,17}-[0-9a-z]+\\.${service}\\.${region}\\.vpce\\.amazonaws\\.com$`,
    );
    if (typeof v.dnsName !== 'string' || !dnsName.test(v.dnsName))
      throw new InvalidDeploymentSettingsError(
        `${at}.dnsName`,
        `${JSON.stringify(v.dnsName)} is not the regional DNS name of a ${service} endpoint in ${region}: ${endpointHint(region, service)}`,
      );
    if (typeof v.hostedZoneId !== 'string' || !/^Z[0-9A-Z]{4,31}$/.test(v.hostedZoneId))
      throw new InvalidDeploymentSettingsError(
        `${at}.hostedZoneId`,
        `${JSON.stringify(v.hostedZoneId)} is not a Route 53 hosted zone id (Z…): ${endpointHint(region, service)}`,
      );
    out[service] = { dnsName: v.dnsName, hostedZoneId: v.hostedZoneId };
  }
  return out;
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
