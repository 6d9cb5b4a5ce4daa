/**
 * How a local region (or a runtime of several) takes on the IAM layer: the policy set
 * synthesized for its regions (cached: `load.ts`), one {@link LocalIam} enforcing it, the gate put
 * in front of each emulator, and the keys every principal uses (docs/local-region.md, "IAM").
 */
import type { Server } from 'node:http';
import type { RegionDescription } from '../../shared/region/resources.js';
import { LocalIam, type LocalIamOptions } from './gate.js';
import { loadLocalPolicies } from './load.js';
import { AD_SERVER_PRINCIPAL, accessKeyFor, type LocalCredentials, type LocalPolicySet } from './policy.js';
import type { GatedService } from './requests.js';

/** How a region loads its own IAM layer. */
export interface LocalRegionIamOptions extends LocalIamOptions {
  /** Every region of the deployment (peer ARNs in the pacer's policy). @default [this region] */
  readonly regions?: readonly string[];
  /** Changes the synthesized set before it is enforced (tests: a grant removed). @default none */
  readonly edit?: (set: LocalPolicySet) => LocalPolicySet;
  /** Called before a synthesis (a cache miss: seconds). @default none */
  readonly onSynthesize?: (regions: readonly string[]) => void;
}

/**
 * The IAM layer of a set of local regions: the policies synthesized for them (cached), enforced
 * by one {@link LocalIam} the regions share.
 */
export async function localIam(
  regions: readonly string[],
  description: RegionDescription,
  options: Omit<LocalRegionIamOptions, 'regions'> = {},
): Promise<LocalIam> {
  const { shards, instancesPerShard } = description.settings.pacer;
  const { set, cached, file } = await loadLocalPolicies(
    { regions, pacer: { shards, instancesPerShard } },
    options.onSynthesize ? { onSynthesize: () => options.onSynthesize?.(regions) } : {},
  );
  const iam = new LocalIam(options.edit ? options.edit(set) : set, options);
  iam.origin = { file, cached };
  return iam;
}

/** The IAM layer a region runs with, from its `iam` option (undefined: off). */
export async function regionIam(
  option: 'off' | LocalIam | LocalRegionIamOptions | undefined,
  region: string,
  description: RegionDescription,
): Promise<LocalIam | undefined> {
  if (option === 'off') return undefined;
  if (option instanceof LocalIam) return option;
  return localIam(option?.regions ?? [region], description, option ?? {});
}

/** The `guard` option that puts `iam`'s gate in front of one of a region's emulators. */
export function gateOption(
  iam: LocalIam | undefined,
  service: GatedService,
  region: string,
): { guard?: (server: Server) => void } {
  return iam ? { guard: (server: Server) => iam.guard(server, service, region) } : {};
}

/**
 * Every key s3rver must accept signatures of (IAM on or off): the region's functions and ad
 * server, and every principal of the enforced set (peer regions' included).
 */
export function s3AccessKeys(
  region: string,
  description: RegionDescription,
  iam: LocalIam | undefined,
): string[] {
  return [
    ...Object.values(description.functions).map((f) => accessKeyFor(region, f.name)),
    accessKeyFor(region, AD_SERVER_PRINCIPAL),
    ...(iam?.policies.principals.map((p) => accessKeyFor(p.region, p.name)) ?? []),
  ];
}

/** Credentials as the environment variables Lambda gives a function its role's credentials in. */
export function credentialsEnv(c: LocalCredentials): Record<string, string> {
  return { AWS_ACCESS_KEY_ID: c.accessKeyId, AWS_SECRET_ACCESS_KEY: c.secretAccessKey };
}
