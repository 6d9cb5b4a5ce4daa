/**
 * `paceline` — the operator CLI (`npx paceline <command>`), the one entry point for operators;
 * `npm run budgets` and `npm run dead-letters` stay as aliases of `paceline budgets` and
 * `paceline dead-letters`. Conventions every command follows (cli/common.ts):
 *
 * - the target (local regions or AWS, cli/paceline/target.ts) is printed first — on stderr with
 *   `--json`, so stdout is exactly one JSON object;
 * - real AWS is reached only when chosen explicitly (`--aws` or `PACELINE_TARGET=aws`);
 * - `--help` on the CLI and on every command; errors are one line, no stack trace (`--debug`);
 * - the exit codes of cli/common.ts's EXIT (0 ok, 1 unexpected, 2 usage / no target, 3 not
 *   found, 4 conflict, 5 partial, 6 a store unreachable).
 *
 * Commands are registered in {@link commands}, one line each.
 */
import { resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import {
  CliNotFoundError,
  CliUsageError,
  EXIT,
  EXIT_HELP,
  endCli,
  isParseArgsError,
  isUnreachable,
  lineWriter,
} from './common.js';
import type { CliIo, Command } from './paceline/command.js';
import { budgetsCommand, deadLettersCommand, reconcileCommand } from './paceline/delegate.js';
import { leaderOverrideCommand } from './paceline/leader-override.js';
import { statusCommand } from './paceline/status-command.js';
import { failbackCommand, failoverCommand } from './paceline/switch.js';
import { spendCommand } from './spend.js';

export { EXIT } from './common.js';
export type { CliIo, Command } from './paceline/command.js';

/** The registry of commands: one line per command (failover/failback register here too). */
export const commands: Record<string, Command> = {
  status: statusCommand,
  'leader-override': leaderOverrideCommand,
  budgets: budgetsCommand,
  reconcile: reconcileCommand,
  'dead-letters': deadLettersCommand,
  spend: spendCommand,
  failover: failoverCommand,
  failback: failbackCommand,
};

const repoRoot = fileURLToPath(new URL('..', import.meta.url));

function mainUsage(): string {
  const list = Object.entries(commands)
    .map(([name, c]) => `  ${name.padEnd(16)} ${c.summary}`)
    .join('\n');
  return `usage: paceline <command> [options]   (paceline <command> --help for its options)
commands:
${list}
targets: the local regions of a running \`npm start\` or a pasted Client env; --aws (or PACELINE_TARGET=aws) for AWS.
  With no target chosen nothing is touched and the CLI says how to choose.
${EXIT_HELP}`;
}

/** Runs the CLI; returns the exit code. */
export async function main(
  argv: readonly string[],
  io: Omit<CliIo, 'repoRoot'> & { repoRoot?: string },
): Promise<number> {
  const cliIo: CliIo = { ...io, repoRoot: io.repoRoot ?? repoRoot };
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    io.out(mainUsage());
    return name === undefined ? EXIT.usage : EXIT.ok;
  }
  const command = commands[name];
  if (!command) {
    io.err(
      `paceline: unknown command "${name}" (commands: ${Object.keys(commands).join(', ')}; paceline --help)`,
    );
    return EXIT.usage;
  }
  const debug = rest.includes('--debug');
  try {
    return await command.run(rest, cliIo);
  } catch (error) {
    const message = ((error as Error)?.message ?? String(error)).split('\n')[0];
    if (debug) io.err(String((error as Error)?.stack ?? error));
    if (error instanceof CliUsageError || isParseArgsError(error)) {
      io.err(`paceline ${name}: ${message} (paceline ${name} --help)`);
      return EXIT.usage;
    }
    if (error instanceof CliNotFoundError) {
      io.err(`paceline ${name}: ${message}`);
      return EXIT.notFound;
    }
    if (isUnreachable(error)) {
      io.err(`paceline ${name}: could not reach a store: ${message}`);
      return EXIT.unreachable;
    }
    io.err(`paceline ${name}: ${(error as Error)?.name ?? 'Error'}: ${message}`);
    return EXIT.failure;
  }
}

/**
 * Runs the CLI for this process (arguments, stdout/stderr, environment) and ends with its code
 * once stdout and stderr are flushed: a JSON result piped into a slow reader arrives whole.
 */
export async function runFromProcess(): Promise<void> {
  const stdout = lineWriter(process.stdout);
  const stderr = lineWriter(process.stderr);
  const code = await main(process.argv.slice(2), {
    out: (l) => stdout.line(l),
    err: (l) => stderr.line(l),
    env: process.env,
    now: () => Date.now(),
  });
  await endCli(code, stdout, stderr);
}

const invokedDirectly =
  process.argv[1] !== undefined && import.meta.url === pathToFileURL(resolve(process.argv[1])).href;
if (invokedDirectly) await runFromProcess();
