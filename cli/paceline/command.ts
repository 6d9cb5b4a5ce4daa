/**
 * The shape of a `paceline` subcommand and the helpers every one shares (target resolution,
 * printing, one-line errors). A command module exports one {@link Command}; cli/paceline.ts
 * registers it with one line.
 */
import { parseArgs } from 'node:util';
import { CliUsageError, formatHuman } from '../common.js';
import { describeTargets, type RegionTarget, resolveTargets, type TargetNeeds } from './target.js';

/** What a command writes and reads. */
export interface CliIo {
  out(line: string): void;
  err(line: string): void;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly now: () => number;
  /** Repository root (`npm start`'s state folder, `.paceline/`, is found from it or PACELINE_STATE_DIR). */
  readonly repoRoot: string;
}

/**
 * A subcommand: `run` returns the exit code (errors it throws are mapped by cli/paceline.ts). Its
 * one-line summary is in cli/paceline.ts's registry.
 */
export interface Command {
  readonly usage: string;
  run(argv: readonly string[], io: CliIo): Promise<number>;
}

/** Target options every command accepts. */
export const targetOptions = {
  json: { type: 'boolean' },
  aws: { type: 'boolean' },
  regions: { type: 'string' },
  debug: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** The usage lines every command shares. */
export const TARGET_USAGE = `  --regions r1,r2   only these regions (default: every running local region; with --aws, AWS_REGION)
  --aws             real AWS (or PACELINE_TARGET=aws); never chosen silently
  --json            one JSON object on stdout (the target line goes to stderr)
  --debug           stack traces on errors`;

/**
 * Resolves the targets for what the command will reach (`needs`) and prints the target line
 * first, naming every endpoint: on stdout for people, on stderr with `--json` (stdout stays
 * exactly one JSON object). `scope: 'all'` for commands over every region.
 */
export async function chooseTargets(
  values: { aws?: boolean | undefined; regions?: string | undefined; json?: boolean | undefined },
  io: CliIo,
  needs: TargetNeeds,
  scope: 'all' | 'one' = 'one',
): Promise<RegionTarget[]> {
  const targets = resolveTargets(
    { ...(values.aws ? { aws: true } : {}), ...(values.regions ? { regions: values.regions } : {}) },
    io.env,
    io.repoRoot,
    { needs, scope },
  );
  (values.json ? io.err : io.out)(await describeTargets(targets, needs));
  return targets;
}

/** Exactly one region (commands that act on one: budgets, reconcile, dead-letters, leader-override). */
export function oneTarget(targets: readonly RegionTarget[]): RegionTarget {
  if (targets.length !== 1)
    throw new CliUsageError(
      `This command acts on one region; name it with --regions (one of ${targets.map((t) => t.region).join(', ')}).`,
    );
  return targets[0] as RegionTarget;
}

/** Prints a result: JSON (one object) or the human form. */
export function printResult(io: CliIo, json: boolean | undefined, result: unknown): void {
  io.out(json ? JSON.stringify(result) : formatHuman(result));
}

/**
 * Parses a command's target flags; prints its usage and returns undefined for `--help` (the
 * command then exits 0).
 */
export function commandArgs(
  command: Pick<Command, 'usage'>,
  argv: readonly string[],
  io: CliIo,
): ReturnType<typeof splitTargetFlags> | undefined {
  const parsed = splitTargetFlags(argv);
  if (!parsed.values.help) return parsed;
  io.out(command.usage);
  return undefined;
}

/** Splits argv into the target flags and the rest (passed through to a delegated CLI). */
export function splitTargetFlags(argv: readonly string[]): {
  values: { aws?: boolean; regions?: string; json?: boolean; help?: boolean; debug?: boolean };
  rest: string[];
} {
  const rest: string[] = [];
  const mine: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if (['--aws', '--json', '--help', '-h', '--debug'].includes(a)) mine.push(a);
    else if (a === '--regions') mine.push(a, argv[++i] ?? '');
    else if (a.startsWith('--regions=')) mine.push(a);
    else rest.push(a);
  }
  const { values } = parseArgs({ args: mine, options: targetOptions, strict: true });
  return { values, rest };
}
