/**
 * What every operator CLI of Paceline (paceline, budgets, dead-letters, bench) does the same way:
 * `--help`; the target (local emulators or an AWS region) printed to stderr before anything
 * happens; AWS only with `--aws` or `PACELINE_TARGET=aws` (never reached silently because an
 * endpoint variable was missing); human output, or JSON with `--json`; errors as one line (no
 * stack trace; `--debug` adds it) with the exit codes of {@link EXIT}.
 */

import { fileURLToPath } from 'node:url';
import { quietSdkNodeWarning } from '../shared/aws/endpoints.js';
import { errorKind, PacelineError } from '../shared/errors.js';

/** Exit codes shared by the CLIs (documented in their `--help`). */
export const EXIT = {
  ok: 0,
  /** Unexpected failure: an endpoint unreachable, permissions, a bug. */
  failure: 1,
  /** Wrong command line or invalid input: nothing was written. */
  usage: 2,
  /** A referenced account, campaign or plan does not exist. */
  notFound: 3,
  /** An item exists already or changed concurrently. */
  conflict: 4,
  /** Some items of a bulk operation failed (listed in the output); the rest succeeded. */
  partial: 5,
  /** A store (DynamoDB, Kinesis, SSM, Redis) could not be reached or read. */
  unreachable: 6,
  /** A benchmark ran but missed a target (its verdicts say which). */
  verdictFailed: 7,
} as const;

/** Text of the exit codes for `--help` (the same table in every CLI; docs/runbook.md). */
export const EXIT_HELP = `exit codes: 0 ok, 1 unexpected failure, 2 usage, invalid input or no target chosen (nothing written),
  3 not found, 4 conflict, 5 partial failure (see output), 6 a store could not be reached, 7 a benchmark target missed`;

/** How to choose a target: the one message every CLI prints when none is chosen. */
export const NO_TARGET_HELP =
  'No target chosen, nothing was touched: start the local regions (npm start) and paste a region’s "Client env" ' +
  '(or `source .paceline/<region>.env`), or pass --aws (or set PACELINE_TARGET=aws) to act on real AWS.';

/** True when the user explicitly chose real AWS (`--aws` or `PACELINE_TARGET=aws`). */
export function awsChosen(
  flag: boolean | undefined,
  env: Readonly<Record<string, string | undefined>>,
): boolean {
  return flag === true || env.PACELINE_TARGET === 'aws';
}

/** Wrong command line or invalid input; the message says what to type. */
export class CliUsageError extends errorKind('CliUsageError', 'cli.usage') {}

/** A referenced account, campaign or plan does not exist (exit {@link EXIT.notFound}). */
export class CliNotFoundError extends errorKind('CliNotFoundError', 'cli.not-found') {}

/** Some items of a bulk operation failed; the result is still printed. */
export class PartialFailureError extends PacelineError {
  override readonly name = 'PartialFailureError';
  override readonly code = 'cli.partial-failure';
  constructor(
    message: string,
    readonly result: unknown,
  ) {
    super(message);
  }
}

/**
 * `parseArgs` refuses an option value that starts with a dash (`--daily-budget -5`: "argument is
 * ambiguous"); the value's own check says better what is wrong with it. Joins each string option
 * with a following negative number (`-5`, `-0.5`, `-.5`) into `--name=value`.
 */
export function joinNegativeValues(
  argv: readonly string[],
  options: Readonly<Record<string, { readonly type: 'string' | 'boolean' }>>,
): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    const next = argv[i + 1];
    const name = a.startsWith('--') ? a.slice(2) : undefined;
    if (name && options[name]?.type === 'string' && next !== undefined && /^-[\d.]/.test(next)) {
      out.push(`${a}=${next}`);
      i++;
    } else out.push(a);
  }
  return out;
}

/** Renders a result for people: one line per list item, `key: value` lines for an object. */
export function formatHuman(value: unknown): string {
  const flat = (v: unknown) => (v === null || typeof v !== 'object' ? String(v) : JSON.stringify(v));
  if (Array.isArray(value)) {
    if (value.length === 0) return '(none)';
    return value
      .map((item) =>
        item !== null && typeof item === 'object'
          ? Object.entries(item as Record<string, unknown>)
              .map(([k, v]) => `${k}=${flat(v)}`)
              .join('  ')
          : flat(item),
      )
      .join('\n');
  }
  if (value !== null && typeof value === 'object') {
    return Object.entries(value as Record<string, unknown>)
      .map(([k, v]) => `${k}: ${flat(v)}`)
      .join('\n');
  }
  return flat(value);
}

/** How a CLI maps its errors to exit codes (undefined: unexpected → 1). */
export type ExitCodeOf = (error: unknown) => number | undefined;

/** True for errors meaning a store could not be reached or read (exit {@link EXIT.unreachable}). */
export function isUnreachable(error: unknown): boolean {
  const e = error as { name?: string; code?: string; message?: string; $metadata?: unknown };
  return (
    ['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENOTFOUND'].includes(e?.code ?? '') ||
    /ECONNREFUSED|timed out|Connection is closed|MaxRetriesPerRequest|TimeoutError|ControlParameterMissing/i.test(
      `${e?.name} ${e?.message}`,
    ) ||
    (e?.$metadata !== undefined && /Timeout|Networking|ECONN/i.test(`${e?.name} ${e?.message}`))
  );
}

/** Node's own argument-parsing errors (unknown option, missing value). */
export function isParseArgsError(error: unknown): boolean {
  return error instanceof TypeError && String((error as { code?: string }).code).startsWith('ERR_PARSE_ARGS');
}

/**
 * Line output to a process stream that is complete however slowly it is read: each line is
 * handed to the stream, and {@link LineWriter.flushed} resolves once the OS took every line so
 * far. A reader that went away (`| head -c 100`: EPIPE) ends the output quietly: nobody reads the
 * rest, and there is no stack trace.
 */
export interface LineWriter {
  line(text: string): void;
  flushed(): Promise<void>;
}

const quietOnEpipe = new WeakSet<NodeJS.WriteStream>();

/** A {@link LineWriter} on `stream` (process.stdout or process.stderr). */
export function lineWriter(stream: NodeJS.WriteStream): LineWriter {
  if (!quietOnEpipe.has(stream)) {
    quietOnEpipe.add(stream);
    stream.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code !== 'EPIPE') throw error;
    });
  }
  let last: Promise<void> = Promise.resolve();
  return {
    line(text) {
      if (stream.destroyed) return;
      last = new Promise((resolve) => stream.write(`${text}\n`, () => resolve()));
    },
    flushed: () => last,
  };
}

/**
 * Ends a CLI process with `code` once its output is out: sets `process.exitCode` and returns, so
 * Node exits when nothing is left to do — never `process.exit()` under a pipe that still holds
 * output. A handle left open by mistake (a client not closed) cannot keep the process alive: an
 * unref'd timer exits 2 s later, after the output was flushed.
 */
export async function endCli(code: number, ...writers: readonly LineWriter[]): Promise<void> {
  await Promise.all(writers.map((w) => w.flushed()));
  process.exitCode = code;
  setTimeout(() => process.exit(code), 2_000).unref();
}

/**
 * Runs a CLI's `main` as a process: prints the result (human, or JSON with `--json`) and ends
 * with the documented code once the output is flushed; errors are one line on stderr.
 */
export function runCli(options: {
  readonly name: string;
  readonly usage: string;
  readonly argv: readonly string[];
  /** The CLI's main; `log` gets the target line (and other progress) for stderr. */
  readonly main: (argv: string[], env: NodeJS.ProcessEnv, log: (line: string) => void) => Promise<unknown>;
  readonly exitCodeOf: ExitCodeOf;
}): void {
  const { name, argv } = options;
  quietSdkNodeWarning();
  const stdout = lineWriter(process.stdout);
  const stderr = lineWriter(process.stderr);
  if (argv.some((a) => a === '--help' || a === '-h')) {
    stdout.line(`${options.usage}\n${EXIT_HELP}`);
    void endCli(EXIT.ok, stdout);
    return;
  }
  const json = argv.includes('--json');
  const debug = argv.includes('--debug') || Boolean(process.env.NODE_DEBUG?.includes('cli'));
  const print = (result: unknown) =>
    stdout.line(json ? JSON.stringify(result, null, 2) : formatHuman(result));
  options
    .main(
      argv.filter((a) => a !== '--json' && a !== '--debug'),
      process.env,
      (line) => stderr.line(`${name}: ${line}`),
    )
    .then(
      (result) => {
        print(result);
        return EXIT.ok;
      },
      (error: unknown) => {
        if (error instanceof PartialFailureError) {
          print(error.result);
          stderr.line(`${name}: ${error.message}`);
          return EXIT.partial;
        }
        const known =
          error instanceof CliUsageError || isParseArgsError(error)
            ? EXIT.usage
            : (options.exitCodeOf(error) ?? (isUnreachable(error) ? EXIT.unreachable : undefined));
        const e = error as Error;
        const text =
          known === undefined ? `${e?.name ?? 'Error'}: ${e?.message ?? String(error)}` : e.message;
        // One line: the message, never a stack trace (--debug prints one); usage errors carry
        // the usage text after their first line, --help prints it.
        const line =
          known === EXIT.usage
            ? `${String(text).split('\n')[0]} (--help for usage)`
            : String(text).replace(/\s*\n\s*/g, ' ');
        stderr.line(`${name}: ${line}`);
        if (debug) stderr.line(String((error as Error)?.stack ?? error));
        return known ?? EXIT.failure;
      },
    )
    .then((code) => endCli(code, stdout, stderr));
}

/**
 * V8 flags of the simulator's process (`npm run sim`, `npm run bench -- sim`): a 64 MB
 * young-generation semi-space instead of 16 MB. A simulated day keeps many objects alive for a
 * few simulated seconds (tens to hundreds of real milliseconds: notices in flight, the pacer's
 * per-tick state, the readers' refreshed values); with 16 MB semi-spaces they outlive one or two
 * scavenges and are copied and promoted, and scavenges take ~5 ms each, ~12 % of the run. Only the
 * simulator's own process is tuned: the library's benchmarks run with Node's defaults, as an ad
 * server would (docs/pacing-quality.md, "Speed").
 */
export const SIM_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=64'];

/**
 * Runs this script again in a child Node process with `flags` when this one was started without
 * them (stdio shared, signals forwarded) and ends as the child did (its exit code, or the signal
 * that killed it); returns only when they are already set. A marker in the environment stops a second re-run.
 */
export async function ensureNodeFlags(flags: readonly string[]): Promise<void> {
  const given = [...process.execArgv, ...(process.env.NODE_OPTIONS ?? '').split(/\s+/)];
  const missing = flags.filter((f) => !given.includes(f));
  if (missing.length === 0 || process.env.PACELINE_NODE_FLAGS_SET === '1') return;
  await runInChild([...missing, ...process.execArgv, ...process.argv.slice(1)]);
}

/**
 * The simulator's process (`npm run sim`, `npm run bench -- sim`): this script again, as an
 * esbuild bundle without `keepNames`, in plain `node` with {@link SIM_NODE_FLAGS} — the way the
 * CDK ships the same modules to Lambda. Under `tsx` every function object created (each closure of
 * the guard, tracker and reader hot paths) also gets a `defineProperty` for its name; a simulated
 * day creates hundreds of millions of them (~10 % of the simulator's CPU; docs/pacing-quality.md,
 * "Speed"). The bundle is cached in `.local/bundles/` and rebuilt when a source
 * changes. Returns only in the child; when bundling fails, falls back to {@link ensureNodeFlags}
 * (same flags, through `tsx`) with a note on stderr.
 */
export async function ensureSimProcess(): Promise<void> {
  if (process.env.PACELINE_NODE_FLAGS_SET === '1') return;
  const entry = process.argv[1];
  let bundle: string | undefined;
  if (entry) {
    try {
      const { bundleModule } = await import('../local/worker/bundle.js');
      bundle = await bundleModule(entry, fileURLToPath(new URL('..', import.meta.url)), { keepNames: false });
    } catch (error) {
      console.error(
        `simulator: cannot bundle ${entry} (${error instanceof Error ? error.message : String(error)}); running it through tsx`,
      );
    }
  }
  if (!bundle) return ensureNodeFlags(SIM_NODE_FLAGS);
  await runInChild([...SIM_NODE_FLAGS, bundle, ...process.argv.slice(2)]);
}

/** Runs `node args` with this process's stdio and signals, then ends as the child did. */
async function runInChild(args: readonly string[]): Promise<never> {
  const { spawn } = await import('node:child_process');
  const child = spawn(process.execPath, args, {
    stdio: 'inherit',
    env: { ...process.env, PACELINE_NODE_FLAGS_SET: '1' },
  });
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => child.kill(signal));
  // The child's end is this process's: its exit code, or death by the same signal (a parent
  // that waited for it, e.g. a test sending SIGTERM, sees what it would have seen without us).
  child.on('exit', (code, signal) => {
    if (signal) {
      process.removeAllListeners(signal);
      process.kill(process.pid, signal);
      return;
    }
    process.exit(code ?? 1);
  });
  return new Promise<never>(() => {});
}
