/**
 * The pacer function's configuration from its environment (derived from the region description
 * by the CDK stack and the local runner) and the validation of its EventBridge input.
 */

import { isTimeZone } from '../budget/time-zone.js';
import { InvalidEnvError, intEnv, optionalEnv, requireEnv } from '../config/env.js';
import { errorKind } from '../errors.js';
import {
  AUCTION_KINDS,
  type AuctionKind,
  type PacerInput,
  type PacerSettings,
  pacerEnv,
  pacerInstanceId,
  validatePacerSettings,
} from '../region/resources.js';

type Env = Readonly<Record<string, string | undefined>>;

/** Everything the pacer reads from its environment. */
export interface PacerConfig extends PacerSettings {
  readonly region: string;
  /** Audit stream cap per shard. @default 10_000 */
  readonly auditLogMaxLen: number;
  /** Full reload period of the budgets cache, ms. @default 300_000 */
  readonly budgetsFullReloadMs: number;
  /**
   * Longest silence of a Redis node while the pacer's raw reads (live spend, the state reload)
   * wait for replies, ms: past it the tick fails (docs/pacing.md, "Takeover"). A limit on
   * progress, not on a read's duration; a node busy for a few seconds (a slow script, a fork, a
   * failover) must not fail a tick, a hung one must fail it within the tick.
   * @default half a tick (5,000 for 10 s ticks)
   */
  readonly redisSilenceMs: number;
}

/** The environment variable of {@link PacerConfig.redisSilenceMs}. */
export const redisSilenceEnv = 'PACER_REDIS_SILENCE_MS';

/** The region's auction kind from the environment (absent: second price, as the default). */
function auctionFromEnv(env: Env): AuctionKind {
  const raw = optionalEnv(pacerEnv.auction, 'second-price', env);
  if (!(AUCTION_KINDS as readonly string[]).includes(raw))
    throw new InvalidEnvError(pacerEnv.auction, raw, AUCTION_KINDS.join(' or '));
  return raw as AuctionKind;
}

/** The region's audience time zone from the environment (absent: none, each plan's own zone). */
function audienceFromEnv(env: Env): { audienceTimeZone?: string } {
  const raw = optionalEnv(pacerEnv.audienceTimeZone, undefined, env);
  if (raw === undefined) return {};
  if (!isTimeZone(raw))
    throw new InvalidEnvError(pacerEnv.audienceTimeZone, raw, 'an IANA time zone such as America/New_York');
  return { audienceTimeZone: raw };
}

/** Reads and validates the pacer's configuration; throws naming the variable at fault. */
export function pacerConfigFromEnv(env: Env = process.env): PacerConfig {
  // requireEnv names a missing variable; intEnv names one that is not an integer.
  const required = (name: string) => intEnv(name, Number(requireEnv(name, env)), env);
  const settings = validatePacerSettings({
    shards: required(pacerEnv.shards),
    instancesPerShard: required(pacerEnv.instancesPerShard),
    tickMs: required(pacerEnv.tickMs),
    leaseTtlMs: required(pacerEnv.leaseTtlMs),
    minuteMs: intEnv(pacerEnv.minuteMs, 60_000, env),
    auction: auctionFromEnv(env),
    ...audienceFromEnv(env),
  });
  const redisSilenceMs = intEnv(redisSilenceEnv, Math.floor(settings.tickMs / 2), env);
  if (redisSilenceMs < 100 || redisSilenceMs >= settings.tickMs)
    throw new InvalidEnvError(
      redisSilenceEnv,
      String(redisSilenceMs),
      `ms from 100 to below the tick (${settings.tickMs}): long enough for a busy node to answer, short enough to fail a hung one within the tick`,
    );
  return {
    ...settings,
    region: requireEnv('PACELINE_REGION', env),
    auditLogMaxLen: intEnv('PACER_AUDIT_LOG_MAXLEN', 10_000, env),
    budgetsFullReloadMs: intEnv('PACER_BUDGETS_FULL_RELOAD_MS', 300_000, env),
    redisSilenceMs,
  };
}

/** Thrown for an EventBridge input that is not `{shard, instance}` of this layout. */
export class InvalidPacerInputError extends errorKind(
  'InvalidPacerInputError',
  'pacing.invalid-pacer-input',
) {}

/** Validates the rule's constant input against the layout; returns it with the instance id. */
export function parsePacerInput(
  event: unknown,
  settings: Pick<PacerSettings, 'shards' | 'instancesPerShard'>,
): PacerInput & { readonly instanceId: string } {
  const e = event as Partial<Record<keyof PacerInput, unknown>> | null;
  const shard = e?.shard;
  const instance = e?.instance;
  if (
    typeof shard !== 'number' ||
    typeof instance !== 'number' ||
    !Number.isInteger(shard) ||
    !Number.isInteger(instance) ||
    shard < 0 ||
    shard >= settings.shards ||
    instance < 0 ||
    instance >= settings.instancesPerShard
  ) {
    throw new InvalidPacerInputError(
      `Pacer input ${JSON.stringify(event)} is not {"shard": 0..${settings.shards - 1}, "instance": 0..${settings.instancesPerShard - 1}}: ` +
        'each EventBridge rule passes its own (the region description derives them).',
    );
  }
  return { shard, instance, instanceId: pacerInstanceId(shard, instance) };
}
