/**
 * `paceline spend status` and `paceline spend report`: the command around cli/spend.ts and
 * cli/spend-report.ts (which it loads only once the target
 * is chosen: a refused command never loads the AWS SDK).
 */
import { parseArgs } from 'node:util';
import { parseDay } from '../../shared/budget/time-zone.js';
import { CliUsageError, EXIT } from '../common.js';
import type { CliIo, Command } from './command.js';
import { describeTargets, resolveTargets, type TargetNeeds } from './target.js';

const USAGE = `usage: paceline spend status [--account A] [--campaign C] [--day YYYY-MM-DD] [--json] [--regions …] [--aws]
  Per region and plan-day (account, campaign and arm plans; today in each account's time zone unless
  --day): the region's share (soft split) and allocation (hard cap) with several regions, confirmed,
  in flight, leased to ad servers' guards, remaining (allocation or budget − all three) and the
  target E(t) now — the pacer's published curve when fresh, else the linear fail-safe curve; then,
  with several regions, one combined row per plan-day (Σ over regions, allocated, remaining of the
  budget, over). Amounts in currency units; --json prints one object with integer micros:
  {"regions":[{"region":"us-east-1","plans":[{"accountId":"acme","campaignId":"spring","plan":"campaign","day":"2026-11-23","budgetMicros":…,"shareMicros":…,"allocationMicros":…,"confirmedMicros":…,"inFlightMicros":…,"leasedMicros":…,"remainingMicros":…,"targetMicros":…,"targetSource":"published",…}]}],
   "combined":[{"accountId":"acme","campaignId":"spring","plan":"campaign","day":"2026-11-23","budgetMicros":…,"regions":["us-east-1","us-west-2"],"confirmedMicros":…,"inFlightMicros":…,"leasedMicros":…,"allocatedMicros":…,"remainingMicros":…,"overMicros":…}]}
  Target: the local regions of a running \`npm start\` (or a pasted Client env); --aws for AWS.

usage: paceline spend report [--account A] [--campaign C] [--day YYYY-MM-DD] [--flight] [--json] [--regions …] [--aws]
  Per plan-day, every region read summed: expected (Σ E(now) of the curves the guards enforce),
  actual (confirmed + in flight), delivery = actual ÷ expected, the band buyers watch (behind
  < 90 %, on-pace, ahead > 110 %) and, when behind, why: out-of-window, stale-parameters, account-cap,
  no-traffic, lost-auctions or catching-up (docs/spend.md, "Pacing report"). --json prints one object:
  {"plans":[{"accountId":"acme","campaignId":"spring","plan":"campaign","day":"2026-11-23","pacingMode":"even","budgetMicros":…,"regions":["us-east-1"],"expectedMicros":…,"actualMicros":…,"deliveryRatio":0.8123,"band":"behind","reason":"lost-auctions","atMs":…}]}
  A flight plan's row adds "flight": its days, even share, the flight's expected (its even line by
  now) and actual (closed days + today), delivery and band; --flight reports flight plans only.
  Exit codes: 0 done (whatever the bands), 2 bad usage, 3 an account or campaign not found, 6 a store unreachable.`;

/** `paceline spend <status|report>`: registered in cli/paceline.ts's command table. */
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
        flight: { type: 'boolean' },
      },
      allowPositionals: true,
      strict: true,
    });
    if (values.help) {
      io.out(USAGE);
      return EXIT.ok;
    }
    const sub = positionals.join(' ');
    if (sub !== 'status' && sub !== 'report') {
      throw new CliUsageError(
        `unknown spend command "${sub}": use "paceline spend status" or "paceline spend report".`,
      );
    }
    if (values.flight && sub !== 'report') {
      throw new CliUsageError('--flight belongs to "paceline spend report" (flight plans only).');
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
    const { combinedStatus, formatSpendStatus, readSpendStatus } = await import('../spend.js');
    const regions = await readSpendStatus(
      targets,
      {
        ...(values.account === undefined ? {} : { accountId: values.account }),
        ...(values.campaign === undefined ? {} : { campaignId: values.campaign }),
        ...(values.day === undefined ? {} : { day: values.day }),
      },
      io.now(),
    );
    if (sub === 'report') {
      const { formatSpendReport, spendReport } = await import('../spend-report.js');
      const all = spendReport(regions);
      const plans = values.flight ? all.filter((p) => p.flight !== undefined) : all;
      io.out(values.json ? JSON.stringify({ plans }) : formatSpendReport(plans));
      return EXIT.ok;
    }
    io.out(
      values.json
        ? JSON.stringify({ regions, combined: combinedStatus(regions) })
        : formatSpendStatus(regions),
    );
    return EXIT.ok;
  },
};
