/**
 * `paceline budgets …`, `paceline reconcile …`, `paceline dead-letters …`: the same commands as
 * `npm run budgets` / `npm run dead-letters` (which stay as aliases), run against the region
 * `paceline` resolved (a running `npm start` region, a pasted Client env, or AWS with --aws).
 */
import { CliUsageError, EXIT, PartialFailureError } from '../common.js';
import { BUDGETS_USAGE, DEAD_LETTERS_USAGE } from '../usage.js';
import { type Command, commandArgs, oneTarget, printResult, TARGET_USAGE } from './command.js';
import { resolveTargets } from './target.js';

type DelegatedMain = (
  argv: string[],
  env: NodeJS.ProcessEnv,
  log: (line: string) => void,
) => Promise<unknown>;

/** The delegated CLI: its main and its error → exit code map (loaded once the target is chosen). */
interface Delegated {
  readonly main: DelegatedMain;
  readonly exitCodeOf?: (error: unknown) => number | undefined;
}

function delegate(options: {
  readonly usage: string;
  /** Loads the delegated CLI (and the AWS SDK it imports): a refused command never does. */
  readonly load: () => Promise<Delegated>;
  /** Arguments put before the user's (e.g. `reconcile`). */
  readonly prefix?: readonly string[];
}): Command {
  return {
    usage: `${options.usage}\n${TARGET_USAGE}`,
    async run(argv, io) {
      const args = commandArgs(this, argv, io);
      if (!args) return EXIT.ok;
      const { values, rest } = args;
      // Only the region is chosen here; the delegated CLI knows which services its command uses,
      // checks the target for them and prints the one target line naming every endpoint.
      const target = oneTarget(
        resolveTargets(
          { ...(values.aws ? { aws: true } : {}), ...(values.regions ? { regions: values.regions } : {}) },
          io.env,
          io.repoRoot,
          { needs: { services: [], redis: false } },
        ),
      );
      const aws = target.kind === 'aws';
      // The delegated CLI reads its endpoints and names from the environment: give it the
      // chosen region's (a local region's Client env, or the caller's with that AWS region).
      const env: NodeJS.ProcessEnv = aws
        ? { ...io.env, AWS_REGION: target.region, PACELINE_TARGET: 'aws' }
        : { ...target.env };
      const delegated = await options.load();
      try {
        const result = await delegated.main(
          [...(options.prefix ?? []), ...rest, ...(aws ? ['--aws'] : [])],
          env,
          (line) => io.err(line),
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
        const code = delegated.exitCodeOf?.(error);
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
  usage: `usage: paceline budgets <account|campaign|plan> <put|list> [options]   (same options as npm run budgets)
${BUDGETS_USAGE}`,
  load: async () => {
    const budgets = await import('../budgets.js');
    return { main: budgets.main, exitCodeOf: budgets.budgetsExitCode };
  },
});

/** `paceline reconcile --campaign C [--day D] [--force]`. */
export const reconcileCommand = delegate({
  usage: `usage: paceline reconcile --campaign C [--day YYYY-MM-DD] [--force]
  Rebuilds the plan-days of campaign C (account, campaign and arm plans) from the spend ledger.
  Without --force an initialised day is left alone and reported as it is.`,
  load: async () => {
    const budgets = await import('../budgets.js');
    return { main: budgets.main, exitCodeOf: budgets.budgetsExitCode };
  },
  prefix: ['reconcile'],
});

/** `paceline dead-letters list|replay|redrive …`. */
export const deadLettersCommand = delegate({
  usage: `usage: paceline dead-letters <list|replay|redrive> --source <function> [options]   (same options as npm run dead-letters)
${DEAD_LETTERS_USAGE}`,
  load: async () => ({ main: (await import('../dead-letters.js')).main }),
});
