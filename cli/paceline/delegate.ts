/**
 * `paceline budgets …`, `paceline reconcile …`, `paceline dead-letters …`: the same commands as
 * `npm run budgets` / `npm run dead-letters` (which stay as aliases), run against the region
 * `paceline` resolved (a running `npm start` region, a pasted Client env, or AWS with --aws).
 */
import { BUDGETS_USAGE, budgetsExitCode, main as budgetsMain } from '../budgets.js';
import { CliUsageError, EXIT, PartialFailureError } from '../common.js';
import { DEAD_LETTERS_USAGE, main as deadLettersMain } from '../dead-letters.js';
import { type Command, chooseTargets, commandArgs, oneTarget, printResult, TARGET_USAGE } from './command.js';

type DelegatedMain = (
  argv: string[],
  env: NodeJS.ProcessEnv,
  log: (line: string) => void,
  now: () => number,
) => Promise<unknown>;

function delegate(options: {
  readonly summary: string;
  readonly usage: string;
  readonly main: DelegatedMain;
  /** Arguments put before the user's (e.g. `reconcile`). */
  readonly prefix?: readonly string[];
  readonly exitCodeOf?: (error: unknown) => number | undefined;
}): Command {
  return {
    summary: options.summary,
    usage: `${options.usage}\n${TARGET_USAGE}`,
    async run(argv, io) {
      const args = commandArgs(this, argv, io);
      if (!args) return EXIT.ok;
      const { values, rest } = args;
      const target = oneTarget(chooseTargets(values, io));
      const aws = target.kind === 'aws';
      // The delegated CLI reads its endpoints and names from the environment: give it the
      // chosen region's (a local region's Client env, or the caller's with that AWS region).
      const env: NodeJS.ProcessEnv = aws
        ? { ...io.env, AWS_REGION: target.region, PACELINE_TARGET: 'aws' }
        : { ...target.env };
      try {
        const result = await options.main(
          [...(options.prefix ?? []), ...rest, ...(aws ? ['--aws'] : [])],
          env,
          (line) => io.err(line),
          io.now,
        );
        printResult(io, values.json, result);
        return EXIT.ok;
      } catch (error) {
        if (error instanceof PartialFailureError) {
          printResult(io, values.json, error.result);
          io.err(error.message);
          return EXIT.partial;
        }
        if (error instanceof CliUsageError) throw new CliUsageError(String(error.message).split('\n')[0]);
        const code = options.exitCodeOf?.(error);
        if (code !== undefined) {
          io.err(String((error as Error).message).split('\n')[0] as string);
          return code;
        }
        throw error; // cli/paceline.ts maps it (unreachable store: 6, else 1)
      }
    },
  };
}

/** `paceline budgets …` (accounts, campaigns, plans, reshard). */
export const budgetsCommand = delegate({
  summary: 'accounts, campaigns and budget plans (put/list), reshard, rehome — as npm run budgets',
  usage: `usage: paceline budgets <account|campaign|plan> <put|list> [options]   (same options as npm run budgets)
${BUDGETS_USAGE}`,
  main: budgetsMain,
  exitCodeOf: budgetsExitCode,
});

/** `paceline reconcile --campaign C [--day D] [--force]`. */
export const reconcileCommand = delegate({
  summary: "rebuild a campaign-day's live spend counters from the ledger",
  usage: `usage: paceline reconcile --campaign C [--day YYYY-MM-DD] [--force]
  Rebuilds the plan-days of campaign C (account, campaign and arm plans) from the spend ledger.
  Without --force an initialised day is left alone and reported as it is.`,
  main: budgetsMain,
  prefix: ['reconcile'],
  exitCodeOf: budgetsExitCode,
});

/** `paceline dead-letters list|replay|redrive …`. */
export const deadLettersCommand = delegate({
  summary: 'quarantined records and failed batches: list, replay, redrive — as npm run dead-letters',
  usage: `usage: paceline dead-letters <list|replay|redrive> --source <function> [options]   (same options as npm run dead-letters)
${DEAD_LETTERS_USAGE}`,
  main: deadLettersMain,
});
