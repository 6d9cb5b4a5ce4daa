/**
 * `paceline` — the operator CLI (`npx paceline <command>`). Conventions every command follows:
 *
 * - the target (local regions or AWS, cli/paceline/target.ts) is printed first — on stderr with
 *   `--json`, so stdout is exactly one JSON object;
 * - real AWS is reached only when chosen explicitly (`--aws` or `PACELINE_TARGET=aws`);
 * - `--help` on the CLI and on every command; errors are one line, no stack trace;
 * - exit codes: 0 done, 1 unexpected internal error, 2 usage error or no target chosen,
 *   3 a store (DynamoDB, Redis, SSM) could not be read.
 *
 * Commands are registered in {@link commands}; later issues add theirs (failover, budgets,
 * dead-letters…).
 */
import { resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { formatStatus, readStatus } from './paceline/status.js';
import { failbackCommand, failoverCommand } from './paceline/switch.js';
import { CliUsageError, describeTargets, resolveTargets } from './paceline/target.js';

/** Exit codes (documented in docs/operations.md and `paceline --help`). */
export const EXIT = { ok: 0, internal: 1, usage: 2, unreachable: 3 } as const;

/** What a command writes. */
export interface CliIo {
  out(line: string): void;
  err(line: string): void;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly now: () => number;
}

/** A subcommand. */
export interface Command {
  readonly summary: string;
  readonly usage: string;
  run(argv: readonly string[], io: CliIo): Promise<number>;
}

const repoRoot = fileURLToPath(new URL('..', import.meta.url));

const targetOptions = {
  json: { type: 'boolean' },
  aws: { type: 'boolean' },
  regions: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** The registry of commands. */
export const commands: Record<string, Command> = {
  status: {
    summary: 'per region and pacer shard: lease holder, epoch, last published tick and its age, override',
    usage: `usage: paceline status [--json] [--regions us-east-1,us-west-2] [--aws]
  Lists, per region and pacer shard, the lease holder and epoch, the last published tick and its
  age, and the leader override. --json prints exactly one object:
  {"regions":[{"region":"us-east-1","shards":[{"shard":0,"leader":"s0-i1","epoch":3,"lastTick":179544794,"ageMs":1840,"override":"auto",…}]}]}
  Target: the local regions of a running \`npm start\` (or a pasted Client env); --aws for AWS.`,
    async run(argv, io) {
      const { values } = parseArgs({ args: [...argv], options: targetOptions, strict: true });
      if (values.help) {
        io.out(this.usage);
        return EXIT.ok;
      }
      const targets = resolveTargets(values, io.env, repoRoot);
      (values.json ? io.err : io.out)(describeTargets(targets));
      const report = await readStatus(targets, io.now());
      io.out(values.json ? JSON.stringify(report) : formatStatus(report));
      return EXIT.ok;
    },
  },
  failover: failoverCommand,
  failback: failbackCommand,
};

function mainUsage(): string {
  const list = Object.entries(commands)
    .map(([name, c]) => `  ${name.padEnd(10)} ${c.summary}`)
    .join('\n');
  return `usage: paceline <command> [options]   (paceline <command> --help for its options)
commands:
${list}
targets: the local regions of a running \`npm start\` or a pasted Client env; --aws (or PACELINE_TARGET=aws) for AWS.
exit codes: 0 done, 1 internal error, 2 usage error or no target, 3 a store could not be read.`;
}

/** True for errors meaning a store could not be reached (exit 3). */
function unreachable(error: unknown): boolean {
  const e = error as { name?: string; code?: string; message?: string; $metadata?: unknown };
  return (
    e?.$metadata !== undefined ||
    ['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENOTFOUND'].includes(e?.code ?? '') ||
    /ECONNREFUSED|timed out|Connection is closed|MaxRetriesPerRequest|TimeoutError|ControlParameterMissing/i.test(
      `${e?.name} ${e?.message}`,
    )
  );
}

/** Runs the CLI; returns the exit code. */
export async function main(argv: readonly string[], io: CliIo): Promise<number> {
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
  try {
    return await command.run(rest, io);
  } catch (error) {
    const message = ((error as Error)?.message ?? String(error)).split('\n')[0];
    if (error instanceof CliUsageError || (error as { code?: string })?.code?.startsWith('ERR_PARSE_ARGS')) {
      io.err(`paceline ${name}: ${message}`);
      return EXIT.usage;
    }
    if (unreachable(error)) {
      io.err(`paceline ${name}: could not read a store: ${message}`);
      return EXIT.unreachable;
    }
    io.err(`paceline ${name}: internal error: ${message}`);
    return EXIT.internal;
  }
}

/** Runs the CLI for this process (arguments, stdout/stderr, environment) and exits with its code. */
export async function runFromProcess(): Promise<never> {
  const code = await main(process.argv.slice(2), {
    out: (l) => console.log(l),
    err: (l) => console.error(l),
    env: process.env,
    now: () => Date.now(),
  });
  process.exit(code);
}

const invokedDirectly =
  process.argv[1] !== undefined && import.meta.url === pathToFileURL(resolve(process.argv[1])).href;
if (invokedDirectly) await runFromProcess();
