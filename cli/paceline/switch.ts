/**
 * `paceline failover --region A --to B` and `paceline failback --region A`: set region A's
 * publish switch (`/paceline/A/publisher-region`) so region B's pacer publishes into A's cache,
 * or A's own again. The switch's new version is the fence generation g: from the first tick each
 * side reads it, the new publisher's claims outrank the old one's (docs/pacing.md, "Many
 * regions"). With `--wait <s>` the command then watches A's cache until every pacer shard's claim
 * carries that generation (exit 4 if not within the time).
 *
 * Idempotent: a switch already naming the wanted region is left alone (its version unchanged).
 */

import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { shardKeys } from '../../shared/pacing/keys.js';
import { connectRedis } from '../../shared/redis/connect.js';
import { parameterPrefix, regionResources } from '../../shared/region/resources.js';
import { EXIT } from '../common.js';
import { CliUsageError, describeTargets, type RegionTarget, redisOf, resolveTargets } from './target.js';

/**
 * Exit code when `--wait` saw the switch not taken up by every shard in time: the switch was
 * written, some shards may have confirmed it (the output says how many) — a partial outcome.
 */
export const EXIT_NOT_CONFIRMED = EXIT.partial;

/** What a switch command prints with `--json`. */
export interface SwitchResult {
  readonly region: string;
  readonly publisherRegion: string;
  readonly previous: string;
  /** The switch's version = the fence generation g the new publisher claims with. */
  readonly generation: number;
  readonly changed: boolean;
  /** With --wait: shards whose last claim carries the generation / all shards. */
  readonly confirmedShards?: number;
  readonly shards?: number;
}

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));

const REGION_NAME = /^[a-z]{2}(-[a-z]+)+-\d+$/;

/** Minimal shape of a command (cli/paceline.ts's Command). */
interface SwitchCommand {
  readonly usage: string;
  run(argv: readonly string[], io: SwitchIo): Promise<number>;
}

interface SwitchIo {
  out(line: string): void;
  err(line: string): void;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly now: () => number;
}

const options = {
  region: { type: 'string' },
  to: { type: 'string' },
  wait: { type: 'string' },
  json: { type: 'boolean' },
  aws: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

function regionArg(value: string | undefined, flag: string): string {
  if (!value) throw new CliUsageError(`${flag} <region> is required.`);
  if (!REGION_NAME.test(value))
    throw new CliUsageError(`${flag} ${JSON.stringify(value)} is not a region name (e.g. us-east-1).`);
  return value;
}

function waitArg(value: string | undefined): number {
  if (value === undefined) return 0;
  const s = Number(value);
  if (!/^\d+(\.\d+)?$/.test(value) || !(s <= 600))
    throw new CliUsageError(`--wait ${JSON.stringify(value)} must be seconds in 0..600.`);
  return s * 1000;
}

/** Sets the switch; returns the result (before any wait). */
async function setSwitch(target: RegionTarget, to: string): Promise<SwitchResult> {
  // The SDK loads once the target is chosen: a refused command never loads it.
  const { GetParameterCommand, PutParameterCommand } = await import('@aws-sdk/client-ssm');
  const { ssmClient } = await import('../../shared/aws/clients.js');
  const ssm = ssmClient(target.endpoints);
  try {
    const name = `${parameterPrefix(target.region)}${regionResources.parameters.publisherRegion.path}`;
    const current = (await ssm.send(new GetParameterCommand({ Name: name }))).Parameter;
    const previous = current?.Value ?? '';
    if (previous === to) {
      return {
        region: target.region,
        publisherRegion: to,
        previous,
        generation: current?.Version ?? 0,
        changed: false,
      };
    }
    const put = await ssm.send(
      new PutParameterCommand({ Name: name, Value: to, Overwrite: true, Type: 'String' }),
    );
    return {
      region: target.region,
      publisherRegion: to,
      previous,
      generation: put.Version ?? 0,
      changed: true,
    };
  } finally {
    ssm.destroy();
  }
}

/** Polls the region's cache until every shard's claim carries generation ≥ g, or the time is up. */
async function waitForGeneration(
  target: RegionTarget,
  generation: number,
  waitMs: number,
  now: () => number,
): Promise<{ confirmed: number; shards: number }> {
  const shards = Number(target.env.PACER_SHARDS ?? regionResources.settings.pacer.shards);
  const redis = connectRedis(redisOf(target));
  redis.on('error', () => {});
  try {
    const deadline = now() + waitMs;
    for (;;) {
      let confirmed = 0;
      for (let s = 0; s < shards; s++) {
        const [g] = await redis.hmget(shardKeys(s).claim, 'g');
        if (g !== null && Number(g) >= generation) confirmed++;
      }
      if (confirmed === shards || now() >= deadline) return { confirmed, shards };
      await new Promise((r) => setTimeout(r, 250));
    }
  } finally {
    redis.disconnect();
  }
}

function format(r: SwitchResult): string {
  const head = r.changed
    ? `${r.region}: publisher-region ${r.previous} → ${r.publisherRegion} (generation ${r.generation})`
    : `${r.region}: publisher-region already ${r.publisherRegion} (generation ${r.generation}); nothing changed`;
  return r.shards === undefined
    ? head
    : `${head}\n${r.confirmedShards}/${r.shards} shards claimed at generation ≥ ${r.generation}`;
}

function switchCommand(kind: 'failover' | 'failback'): SwitchCommand {
  const usage =
    kind === 'failover'
      ? `usage: paceline failover --region A --to B [--wait <s>] [--json] [--aws]
  Makes region B's pacer publish into region A's cache: sets /paceline/A/publisher-region to B (its
  new version is the fence generation that outranks A's pacers). --wait watches A's cache until every
  pacer shard was claimed at that generation. --json prints one object:
  {"region":"us-east-1","publisherRegion":"us-west-2","previous":"us-east-1","generation":3,"changed":true}
  Exit codes: 0 done, 1 internal error, 2 usage error / no target, 5 written but not confirmed by every shard
  within --wait (see confirmedShards), 6 SSM or Redis unreachable.`
      : `usage: paceline failback --region A [--wait <s>] [--json] [--aws]
  Gives region A's cache back to A's own pacer: sets /paceline/A/publisher-region to A (a new
  generation: A's claims outrank the peer's from the first tick A's pacers read it). --wait and --json
  as for failover. Exit codes: 0 done, 1 internal error, 2 usage error / no target, 5 not confirmed by every
  shard within --wait, 6 unreachable.`;
  return {
    usage,
    async run(argv, io) {
      const { values } = parseArgs({ args: [...argv], options, strict: true });
      if (values.help) {
        io.out(usage);
        return 0;
      }
      const region = regionArg(values.region, '--region');
      const to = kind === 'failover' ? regionArg(values.to, '--to') : region;
      if (kind === 'failback' && values.to !== undefined)
        throw new CliUsageError('failback takes no --to (it names --region itself).');
      if (kind === 'failover' && to === region) {
        throw new CliUsageError(
          `--to ${to} is --region itself: use \`paceline failback --region ${region}\`.`,
        );
      }
      const waitMs = waitArg(values.wait);
      // The switch is an SSM parameter; --wait also watches the region's cache.
      const needs = { services: ['ssm'] as const, redis: waitMs > 0 };
      const [target] = resolveTargets({ ...values, regions: region }, io.env, repoRoot, { needs }) as [
        RegionTarget,
      ];
      (values.json ? io.err : io.out)(await describeTargets([target], needs));
      let result = await setSwitch(target, to);
      if (waitMs > 0) {
        const w = await waitForGeneration(target, result.generation, waitMs, io.now);
        result = { ...result, confirmedShards: w.confirmed, shards: w.shards };
      }
      io.out(values.json ? JSON.stringify(result) : format(result));
      return result.shards !== undefined && result.confirmedShards !== result.shards ? EXIT_NOT_CONFIRMED : 0;
    },
  };
}

/** `paceline failover`. */
export const failoverCommand: SwitchCommand = switchCommand('failover');
/** `paceline failback`. */
export const failbackCommand: SwitchCommand = switchCommand('failback');
