/**
 * A region's network settings in the deployment (`paceline:regions.<region>.network`): its VPC
 * CIDR, VPC id, peering connections and the interface endpoints peer regions resolve its APIs to
 * (docs/operations.md, "Network between regions"). Validated here; deployment.ts checks the CIDRs
 * of the regions against each other.
 */
import { InvalidDeploymentSettingsError, isObject, only } from './deployment-input.js';

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

/** Parses `a.b.c.d/n` into [first address as an integer, prefix length]. */
export function parseCidr(key: string, v: unknown): [number, number] {
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

/** Parses and checks one region's `network` (the default when there is one region and none is given). */
export function parseNetwork(
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
