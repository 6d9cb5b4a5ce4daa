/**
 * `paceline leader-override --shard N --instance I|auto`: names the instance that publishes for
 * pacer shard N (the lease holder stops publishing while an override names someone else), or
 * hands the shard back to its lease holder (`auto`). Writes the SSM parameter
 * `/paceline/<region>/pacer/leader-override/<N>`; pacers read it every tick.
 */
import {
  AUTO_LEADER,
  defaultPacerSettings,
  leaderOverridePath,
  pacerEnv,
  pacerInstanceId,
  parameterPrefix,
} from '../../shared/region/resources.js';
import { CliUsageError, EXIT } from '../common.js';
import { type Command, chooseTargets, commandArgs, oneTarget, printResult, TARGET_USAGE } from './command.js';

/** `--json` output. */
export interface LeaderOverrideResult {
  readonly region: string;
  readonly shard: number;
  readonly parameter: string;
  readonly previous: string | null;
  readonly override: string;
  readonly version: number | null;
}

/** Parses `--instance`: `auto`, an instance index (`1`) or an instance id (`s3-i1`). */
export function parseInstance(raw: string, shard: number, instancesPerShard: number): string {
  if (raw === AUTO_LEADER) return AUTO_LEADER;
  const index = /^\d+$/.test(raw) ? Number(raw) : Number(/^s(\d+)-i(\d+)$/.exec(raw)?.[2] ?? Number.NaN);
  const idShard = /^s(\d+)-i\d+$/.exec(raw)?.[1];
  if (idShard !== undefined && Number(idShard) !== shard)
    throw new CliUsageError(`--instance ${raw} belongs to shard ${idShard}, not --shard ${shard}.`);
  if (!Number.isSafeInteger(index) || index < 0 || index >= instancesPerShard)
    throw new CliUsageError(
      `--instance ${JSON.stringify(raw)}: give auto, an index 0…${instancesPerShard - 1} or an id such as ${pacerInstanceId(shard, 0)}.`,
    );
  return pacerInstanceId(shard, index);
}

export const leaderOverrideCommand: Command = {
  usage: `usage: paceline leader-override --shard N --instance I|auto [--regions R] [--json] [--aws]
  --shard N        pacer shard (0 … N-1 of the region's shard count)
  --instance I     an instance index (0 …), an instance id (s<N>-i<I>), or auto (the lease holder publishes)
  Writes /paceline/<region>/pacer/leader-override/<N>; pacers apply it on their next tick.
  --json prints {"region","shard","parameter","previous","override","version"}.
${TARGET_USAGE}`,
  async run(argv, io) {
    const args = commandArgs(this, argv, io);
    if (!args) return EXIT.ok;
    const { values, rest } = args;
    const flags: Record<string, string> = {};
    for (let i = 0; i < rest.length; i++) {
      const a = rest[i] as string;
      if (a !== '--shard' && a !== '--instance') throw new CliUsageError(`Unknown option ${a}.`);
      const v = rest[++i];
      if (v === undefined) throw new CliUsageError(`${a} needs a value.`);
      flags[a.slice(2)] = v;
    }
    if (flags.shard === undefined || flags.instance === undefined)
      throw new CliUsageError('Give both --shard N and --instance I|auto.');
    if (!/^\d+$/.test(flags.shard))
      throw new CliUsageError(`--shard ${JSON.stringify(flags.shard)}: give a whole number.`);
    const shard = Number(flags.shard);
    const target = oneTarget(await chooseTargets(values, io, { services: ['ssm'], redis: false }));
    // The SDK loads once the target is chosen: a refused command never loads it.
    const { GetParameterCommand, PutParameterCommand } = await import('@aws-sdk/client-ssm');
    const { ssmClient } = await import('../../shared/aws/clients.js');
    const { resolvePacerShards } = await import('../../shared/pacing/control.js');
    const ssm = ssmClient(target.endpoints, {
      connectionTimeoutMs: 2_000,
      requestTimeoutMs: 5_000,
      maxAttempts: 2,
    });
    try {
      const shards = await resolvePacerShards(target.env, ssm, target.region);
      if (shard >= shards)
        throw new CliUsageError(`--shard ${shard}: ${target.region} has shards 0…${shards - 1}.`);
      const perShard = Number(
        target.env[pacerEnv.instancesPerShard] ?? defaultPacerSettings.instancesPerShard,
      );
      const override = parseInstance(flags.instance, shard, perShard);
      const parameter = `${parameterPrefix(target.region)}${leaderOverridePath(shard)}`;
      const previous = await ssm
        .send(new GetParameterCommand({ Name: parameter }))
        .then((o) => o.Parameter?.Value ?? null)
        .catch((error: Error) => {
          if (error.name === 'ParameterNotFound') return null;
          throw error;
        });
      const put = await ssm.send(
        new PutParameterCommand({ Name: parameter, Value: override, Type: 'String', Overwrite: true }),
      );
      const result: LeaderOverrideResult = {
        region: target.region,
        shard,
        parameter,
        previous,
        override,
        version: put.Version ?? null,
      };
      printResult(io, values.json, result);
      return EXIT.ok;
    } finally {
      ssm.destroy();
    }
  },
};
