/** `paceline status`: the command around cli/paceline/status.ts. */
import { CliUsageError, EXIT } from '../common.js';
import { type Command, chooseTargets, commandArgs, TARGET_USAGE } from './command.js';

export const statusCommand: Command = {
  usage: `usage: paceline status [--json] [--regions us-east-1,us-west-2] [--aws]
  Per region: the cross-region publish switch (publisher-region, its state and parameter version),
  per pacer shard the lease holder and epoch, last published tick and its age and the leader
  override, the streams' iterator age (kinesalite always reports 0: locally not a measurement),
  and the quarantined records per stream function. --json prints exactly one object:
  {"regions":[{"region":"us-east-1","publisher":{"parameter","publisherRegion","version","state"},
    "shards":[{"shard":0,"leader":"s0-i1","epoch":3,"lastTick":179544794,"ageMs":1840,"override":"auto",…}],
    "streams":[{"stream","iteratorAgeMs","note"}],"deadLetters":{"ingest-actions":0,"track-spend":0}}]}
${TARGET_USAGE}`,
  async run(argv, io) {
    const args = commandArgs(this, argv, io);
    if (!args) return EXIT.ok;
    const { values, rest } = args;
    if (rest.length > 0) throw new CliUsageError(`Unknown argument ${rest[0]}.`);
    const targets = await chooseTargets(values, io, { services: ['dynamodb', 'ssm'], redis: true }, 'all');
    // Loaded after the target was chosen: a refused command never loads the AWS SDK.
    const { formatStatus, readStatus } = await import('./status.js');
    const report = await readStatus(targets, io.now());
    io.out(values.json ? JSON.stringify(report) : formatStatus(report));
    return EXIT.ok;
  },
};
