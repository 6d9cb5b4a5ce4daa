/**
 * The pacer's control plane in SSM Parameter Store, read every tick by every instance:
 *
 * - `/paceline/<region>/publisher-region` — which region's pacer publishes into this region's
 *   cache; its version is the generation `g` of the fence (a failover moves publishing across
 *   regions by flipping it; shared/pacing/regions/cross-region.ts).
 * - `/paceline/<region>/pacer/leader-override/<shard>` — `auto` (the lease holder publishes) or
 *   an instance id; its version is `o` of the fence, so a change of the override outranks every
 *   claim made before it, without DynamoDB.
 *
 * One GetParameters call per tick. When SSM cannot be read the last values read are used (and
 * the snapshot says so): the override keeps working through a DynamoDB outage, and an SSM outage
 * alone changes nothing. A process that never read SSM has no snapshot and does not publish.
 */

import { GetParameterCommand, GetParametersCommand, type SSMClient } from '@aws-sdk/client-ssm';
import { errorKind } from '../errors.js';
import {
  AUTO_LEADER,
  leaderOverridePath,
  pacerShardsPath,
  parameterPrefix,
  regionResources,
} from '../region/resources.js';
import type { Clock } from '../time/clock.js';

/** What the pacer knows of its control parameters at a tick. */
export interface ControlSnapshot {
  /** Value of `publisher-region`. */
  readonly publisherRegion: string;
  /** Version of `publisher-region`: the fence's generation `g`. */
  readonly generation: number;
  /** Value of the shard's leader override: `auto` or an instance id. */
  readonly override: string;
  /** Version of the shard's leader override: the fence's `o`. */
  readonly overrideVersion: number;
  /** When these values were read from SSM (injected clock). */
  readonly readAtMs: number;
  /** False when SSM could not be read this time and the last values read are served. */
  readonly fresh: boolean;
}

/** Thrown when a control parameter is missing (the region was not provisioned from its description). */
export class ControlParameterMissingError extends errorKind(
  'ControlParameterMissingError',
  'pacing.control-parameter-missing',
) {}

/** Options of {@link PacerControl}. */
export interface PacerControlOptions {
  readonly ssm: SSMClient;
  /** The region whose parameters to read (and whose name `publisher-region` must hold to publish). */
  readonly region: string;
  readonly shard: number;
  readonly clock: Clock;
  /**
   * The cache region whose `publisher-region` switch is read, when it is not `region` (a pacer
   * publishing into a peer's cache after a failover reads the peer's switch in the peer's SSM, and
   * its own region's leader override). @default `region` (with `ssm`)
   */
  readonly switchRegion?: { readonly region: string; readonly ssm: SSMClient };
  /**
   * The deployment's SSM parameter root (`PARAMETER_ROOT`, e.g. `/paceline/`; a stage's is
   * `/<stage>-paceline/`): a region's prefix is `<root><region>/`. @default the default names'
   */
  readonly parameterRoot?: string;
}

/** Reads (and caches) one shard's control parameters. */
export class PacerControl {
  private last: ControlSnapshot | undefined;
  private readonly names: { publisher: string; override: string };

  constructor(private readonly options: PacerControlOptions) {
    const prefixOf = (region: string) =>
      options.parameterRoot === undefined ? parameterPrefix(region) : `${options.parameterRoot}${region}/`;
    this.names = {
      publisher: `${prefixOf(options.switchRegion?.region ?? options.region)}${regionResources.parameters.publisherRegion.path}`,
      override: `${prefixOf(options.region)}${leaderOverridePath(options.shard)}`,
    };
  }

  /** The parameters by name: one GetParameters, or one per region for a peer's switch. */
  private async fetch(): Promise<Map<string | undefined, { Value?: string; Version?: number }>> {
    const peer = this.options.switchRegion;
    const get = async (ssm: SSMClient, names: string[]) =>
      (await ssm.send(new GetParametersCommand({ Names: names }))).Parameters ?? [];
    const all =
      peer && peer.region !== this.options.region
        ? (
            await Promise.all([
              get(peer.ssm, [this.names.publisher]),
              get(this.options.ssm, [this.names.override]),
            ])
          ).flat()
        : await get(this.options.ssm, [this.names.publisher, this.names.override]);
    return new Map(all.map((p) => [p.Name, p]));
  }

  /**
   * The current snapshot: read from SSM, or the last one read when SSM fails (`fresh: false`).
   * Undefined when SSM has never been read successfully; `error` then says why.
   */
  async read(): Promise<{ snapshot: ControlSnapshot | undefined; error?: unknown }> {
    try {
      const byName = await this.fetch();
      const publisher = byName.get(this.names.publisher);
      const override = byName.get(this.names.override);
      if (!publisher?.Value || !override?.Value) {
        throw new ControlParameterMissingError(
          `SSM parameter ${!publisher?.Value ? this.names.publisher : this.names.override} is missing: ` +
            'deploy the stack (or start the local region) that provisions it.',
        );
      }
      this.last = {
        publisherRegion: publisher.Value,
        generation: publisher.Version ?? 0,
        override: override.Value,
        overrideVersion: override.Version ?? 0,
        readAtMs: this.options.clock.now(),
        fresh: true,
      };
      return { snapshot: this.last };
    } catch (error) {
      return { snapshot: this.last ? { ...this.last, fresh: false } : undefined, error };
    }
  }
}

/** True when the override names an instance (not `auto`). */
export function overrideActive(snapshot: Pick<ControlSnapshot, 'override'>): boolean {
  return snapshot.override !== AUTO_LEADER;
}

/**
 * The region's pacer shard count N as writers must use it: `PACER_SHARDS` when set, else the SSM
 * parameter `/paceline/<region>/pacer/shards` (provisioned from the region description).
 */
export async function resolvePacerShards(
  env: Readonly<Record<string, string | undefined>>,
  ssm: SSMClient,
  region: string,
): Promise<number> {
  const raw = env.PACER_SHARDS;
  if (raw !== undefined && raw !== '') return parseShards(raw, 'PACER_SHARDS');
  const name = `${parameterPrefix(region)}${pacerShardsPath}`;
  try {
    const out = await ssm.send(new GetParameterCommand({ Name: name }));
    return parseShards(out.Parameter?.Value ?? '', name);
  } catch (error) {
    if (error instanceof ControlParameterMissingError) throw error;
    throw new ControlParameterMissingError(
      `Cannot find the pacer shard count: set PACER_SHARDS or make ${name} readable (${(error as Error).message}).`,
      { cause: error },
    );
  }
}

function parseShards(raw: string, source: string): number {
  const n = Number(raw);
  if (!/^\d+$/.test(raw) || !Number.isSafeInteger(n) || n < 1) {
    throw new ControlParameterMissingError(
      `${source}=${JSON.stringify(raw)} is not a shard count (a whole number ≥ 1).`,
    );
  }
  return n;
}
