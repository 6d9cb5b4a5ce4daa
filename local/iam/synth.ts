/**
 * Synthesizes the real CDK app (`cdk/app.ts`) for a set of local regions and extracts every
 * principal's identity policies from it (`template.ts`). The deployment synthesized is the one a
 * user would deploy for exactly those regions: `cdk.json`'s context with
 *
 * - `paceline:account` = the local account (every ARN then names local resources),
 * - `paceline:regions` = the local regions (cdk.json's entry where it has one, else a VPC CIDR
 *   of its own) and `paceline:primaryRegion` = cdk.json's primary if it is one of them, else the
 *   first,
 * - the local pacer layout (`paceline:pacerShards`, `paceline:pacerInstancesPerShard`): the
 *   pacer's policy names one leader-override parameter per shard,
 * - the default stage (no `paceline:stage`): local resources have the default names,
 * - availability zones for each region (no lookup), no asset bundling
 *   (`aws:cdk:bundling-stacks` = []), construct paths and asset paths in the metadata (the
 *   ad-server policy is found by its path, a nested stack's template by its asset path), and no
 *   validation plugin
 *   (cdk-nag runs in `npm run synth`; here it would cost ~20 s).
 *
 * Runs in its own process (`synth-main.ts`), started by `load.ts` on a cache miss: the CDK is
 * never loaded into the runner or a test worker.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App } from 'aws-cdk-lib';
import { buildApp } from '../../cdk/app.js';
import { physicalName, regionResources } from '../../shared/region/resources.js';
import type { CfnTemplate } from './intrinsics.js';
import { LOCAL_ACCOUNT, type LocalPolicySet } from './policy.js';
import { extractPrincipals } from './template.js';

/** What the local policies are synthesized for. */
export interface LocalSynthInput {
  /** The local regions (the first is primary unless cdk.json's primary is among them). */
  readonly regions: readonly string[];
  readonly pacer: { readonly shards: number; readonly instancesPerShard: number };
}

/** cdk.json's context. */
export function cdkJsonContext(repoRoot: string): Record<string, unknown> {
  const json = JSON.parse(readFileSync(join(repoRoot, 'cdk.json'), 'utf8')) as {
    context?: Record<string, unknown>;
  };
  return json.context ?? {};
}

/** The CDK context of the local deployment (module comment). */
export function localSynthContext(
  base: Readonly<Record<string, unknown>>,
  input: LocalSynthInput,
): Record<string, unknown> {
  const configured = (base['paceline:regions'] ?? {}) as Record<string, unknown>;
  const entries = Array.isArray(configured) ? {} : configured;
  const regions: Record<string, unknown> = {};
  input.regions.forEach((region, i) => {
    // A region cdk.json does not know gets a CIDR no configured region uses (10.200+i.0.0/16).
    regions[region] = entries[region] ?? { network: { cidr: `10.${200 + i}.0.0/16` } };
  });
  const primary = String(base['paceline:primaryRegion'] ?? '');
  const context: Record<string, unknown> = {
    ...base,
    'paceline:account': LOCAL_ACCOUNT,
    'paceline:regions': regions,
    'paceline:primaryRegion': input.regions.includes(primary) ? primary : input.regions[0],
    'paceline:pacerShards': input.pacer.shards,
    'paceline:pacerInstancesPerShard': input.pacer.instancesPerShard,
    'aws:cdk:bundling-stacks': [],
    'aws:cdk:enable-path-metadata': true,
    // Nested stacks then name their template file (`aws:asset:path`).
    'aws:cdk:enable-asset-metadata': true,
  };
  for (const region of input.regions)
    context[`availability-zones:account=${LOCAL_ACCOUNT}:region=${region}`] = ['a', 'b', 'c'].map(
      (z) => `${region}${z}`,
    );
  // The local runtime names its resources with the default stage (shared/region/resources.ts
  // physicalName): a deployment stage in cdk.json must not rename them in the local policies.
  delete context['paceline:stage'];
  return context;
}

/** Synthesizes and extracts (in this process); `hash` is recorded in the result. */
export function synthesizeLocalPolicies(
  repoRoot: string,
  input: LocalSynthInput,
  hash: string,
): LocalPolicySet {
  const started = performance.now();
  const context = localSynthContext(cdkJsonContext(repoRoot), input);
  const outdir = mkdtempSync(join(tmpdir(), 'paceline-iam-synth-'));
  try {
    const app = new App({ context, outdir, builtinCloudFormationValidation: false });
    buildApp(app, { validate: false });
    const assembly = app.synth();
    const { principals, diagnostics } = extractPrincipals({
      account: LOCAL_ACCOUNT,
      stacks: assembly.stacks.map((s) => ({
        stackName: s.stackName,
        region: s.environment.region,
        template: s.template as CfnTemplate,
      })),
      readNested: (assetPath) =>
        JSON.parse(readFileSync(join(assembly.directory, assetPath), 'utf8')) as CfnTemplate,
      functionNames: Object.values(regionResources.functions).map((f) => f.name),
      bucketNamesByEnvVar: Object.fromEntries(
        Object.values(regionResources.buckets).map((b) => [b.envVar, physicalName(b.suffix)]),
      ),
    });
    if (diagnostics.length > 0)
      throw new Error(
        `local IAM: the synthesized policies hold values that cannot be resolved locally:\n  ${diagnostics.join('\n  ')}`,
      );
    return {
      version: 1,
      account: LOCAL_ACCOUNT,
      synthesis: {
        hash,
        synthMs: Math.round(performance.now() - started),
        at: new Date().toISOString(),
        regions: [...input.regions],
        primaryRegion: String(context['paceline:primaryRegion']),
        pacer: { ...input.pacer },
      },
      principals,
    };
  } finally {
    rmSync(outdir, { recursive: true, force: true });
  }
}
