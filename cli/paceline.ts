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
import { quietSdkNodeWarning } from '../shared/aws/endpoints.js';
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

export { EXIT } from './common.js';
export type { CliIo, Command } from './paceline/command.js';

/**
 * A registered command: its one-line summary and its module, loaded only when it runs (the AWS
 * SDK clients a command imports cost seconds to load; `--help` and a refused target need none).
 */
export interface RegisteredCommand {
  readonly summary: string;
  load(): Promise<Command>;
}

/** The registry of commands: one line per command. */
export const commands: Record<string, RegisteredCommand> = {
  status: {
    summary:
      'per region: pacer shards (leader, epoch, parameter age, override), publish switch, streams, dead letters',
    load: async () => (await import('./paceline/status-command.js')).statusCommand,
  },
  'leader-override': {
    summary: 'name the instance that publishes for a pacer shard, or hand it back to the lease holder (auto)',
    load: async () => (await import('./paceline/leader-override.js')).leaderOverrideCommand,
  },
  budgets: {
    summary: 'accounts, campaigns and budget plans (put/list), reshard, rehome — as npm run budgets',
    load: async () => (await import('./paceline/delegate.js')).budgetsCommand,
  },
  reconcile: {
    summary: "rebuild a campaign-day's live spend counters from the ledger",
    load: async () => (await import('./paceline/delegate.js')).reconcileCommand,
  },
  'dead-letters': {
    summary: 'quarantined records and failed batches: list, replay, redrive — as npm run dead-letters',
    load: async () => (await import('./paceline/delegate.js')).deadLettersCommand,
  },
  spend: {
    summary:
      'spend status: per region and plan-day share, allocation, confirmed, in-flight, leased, remaining, E(t) now; combined rows. spend report: expected vs actual, the 90/110 % band, why behind',
    load: async () => (await import('./paceline/spend-command.js')).spendCommand,
  },
  failover: {
    summary: "make region B's pacer publish into region A's cache (--region A --to B)",
    load: async () => (await import('./paceline/switch.js')).failoverCommand,
  },
  failback: {
    summary: "give region A's cache back to A's own pacer (--region A)",
    load: async () => (await import('./paceline/switch.js')).failbackCommand,
  },
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
  const registered = commands[name];
  if (!registered) {
    io.err(
      `paceline: unknown command "${name}" (commands: ${Object.keys(commands).join(', ')}; paceline --help)`,
    );
    return EXIT.usage;
  }
  const debug = rest.includes('--debug');
  try {
    const command = await registered.load();
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
  quietSdkNodeWarning();
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
