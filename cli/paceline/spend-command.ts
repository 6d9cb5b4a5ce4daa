/**
 * `paceline spend status`: the command around cli/spend.ts (which it loads only once the target
 * is chosen: a refused command never loads the AWS SDK).
 */
import { parseArgs } from 'node:util';
import { parseDay } from '../../shared/budget/time-zone.js';
import { CliUsageError, EXIT } from '../common.js';
import type { CliIo, Command } from './command.js';
import { describeTargets, resolveTargets, type TargetNeeds } from './target.js';

const USAGE = `usage: paceline spend status [--account A] [--campaign C] [--day YYYY-MM-DD] [--json] [--regions …] [--aws]
  Per plan-day (account, campaign and arm plans; today in each account's time zone unless --day):
  confirmed, in flight, leased to ad servers' guards, remaining (budget − all three) and the target
  E(t) now — the pacer's published curve when fresh, else the linear fail-safe curve. Amounts in
  currency units; --json prints one object with integer micros:
  {"regions":[{"region":"us-east-1","plans":[{"accountId":"acme","campaignId":"spring","plan":"campaign","day":"2026-11-23","budgetMicros":…,"confirmedMicros":…,"inFlightMicros":…,"leasedMicros":…,"remainingMicros":…,"targetMicros":…,"targetSource":"published",…}]}]}
  Target: the local regions of a running \`npm start\` (or a pasted Client env); --aws for AWS.`;

/** `paceline spend <status>`: registered in cli/paceline.ts's command table. */
export const spendCommand: Command = {
  usage: USAGE,
  async run(argv: readonly string[], io: CliIo): Promise<number> {
    const { values, positionals } = parseArgs({
      args: [...argv],
      options: {
        json: { type: 'boolean' },
        aws: { type: 'boolean' },
        regions: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
        account: { type: 'string' },
        campaign: { type: 'string' },
        day: { type: 'string' },
      },
      allowPositionals: true,
      strict: true,
    });
    if (values.help) {
      io.out(USAGE);
      return EXIT.ok;
    }
    if (positionals.join(' ') !== 'status') {
      throw new CliUsageError(
        `unknown spend command "${positionals.join(' ')}": use "paceline spend status".`,
      );
    }
    if (values.day !== undefined) {
      try {
        parseDay(values.day);
      } catch (error) {
        throw new CliUsageError(`--day ${values.day}: ${(error as Error).message}`);
      }
    }
    const needs: TargetNeeds = { services: ['dynamodb', 'ssm'], redis: true };
    const targets = resolveTargets(values, io.env, io.repoRoot, { needs, scope: 'all' });
    (values.json ? io.err : io.out)(await describeTargets(targets, needs));
    const { formatSpendStatus, readSpendStatus } = await import('../spend.js');
    const regions = await readSpendStatus(
      targets,
      {
        ...(values.account === undefined ? {} : { accountId: values.account }),
        ...(values.campaign === undefined ? {} : { campaignId: values.campaign }),
        ...(values.day === undefined ? {} : { day: values.day }),
      },
      io.now(),
    );
    io.out(values.json ? JSON.stringify({ regions }) : formatSpendStatus(regions));
    return EXIT.ok;
  },
};
