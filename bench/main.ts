/**
 * `npm run bench -- <name> [options]`: runs one benchmark against real redis-server (and emulators
 * where the benchmark needs them, all started by the benchmark on loopback — never AWS) and prints
 * a final JSON line. Every benchmark reports the raw-Redis ceiling measured in the same run
 * (bench/ceiling.ts) beside its own figures.
 *
 * Conventions (cli/common.ts): the target is printed first (stderr), progress goes to stderr,
 * `--help` lists every option, errors are one line (`--debug` for the stack), and the JSON line
 * gains `verdicts` (pass/fail for every DESIGN.md target of the benchmark) and `warnings` (an
 * offered rate not sustained) — every other field unchanged. Exit codes: 0 all targets met,
 * 7 a target missed, 2 usage, 1 unexpected failure.
 */
import { EXIT, ensureNodeFlags, ensureSimProcess } from '../cli/common.js';
import { killServersOnSignal } from '../local/emulators/redis.js';
import { PACER_NODE_OPTIONS } from '../shared/region/pacer-settings.js';
import { benchTargets, unsustainedRates, verdicts } from './verdicts.js';

interface Benchmark {
  /** Options with their meaning (for --help and to reject unknown ones). */
  readonly options: Readonly<Record<string, string>>;
  readonly load: () => Promise<{ run(args: string[]): Promise<Record<string, unknown>> }>;
  readonly target: string;
  /** Node flags the benchmark's process runs with (re-run with them when missing). @default none */
  readonly nodeFlags?: readonly string[];
  /** Runs in the simulator's process (cli/common.ts `ensureSimProcess`). @default false */
  readonly simProcess?: boolean;
}

const benchmarks: Record<string, Benchmark> = {
  counting: {
    options: {
      '--events N': 'events ingested (default 300000)',
      '--users N': 'users the events are spread over',
      '--checks N': 'cap checks measured',
      '--skip-buckets': 'skip the day/hour/minute bucket alternative',
      '--skip-freshness': 'skip freshness through the local stream path (starts the local runtime)',
      '--no-collect': "no full collection before the cap checks (the ingest phase's garbage stays)",
    },
    load: () => import('./counting.js'),
    target: 'its own redis-server (standalone, loopback), then its own local runtime for freshness',
    // A full collection between the ingest and the cap-check phases (bench/counting.ts).
    nodeFlags: ['--expose-gc'],
  },
  spend: {
    options: {
      '--seconds N': 'seconds of guard decisions (default 3)',
      '--events N': 'track-spend events (default 4000)',
    },
    load: () => import('./spend.js'),
    target: 'its own redis-server and dynalite (loopback)',
  },
  pacer: {
    options: {
      '--campaigns N': 'campaigns in the shard (default 100000)',
      '--ticks N': 'steady ticks measured (default 5)',
      '--controller default|linear|changing': 'the controller under test',
      '--spend raw|ioredis': 'how live spend is read',
      '--tick-only': 'stop after the ticks (profiling)',
    },
    load: () => import('./pacer.js'),
    target: 'its own redis-server (standalone, loopback)',
    // The pacer function's own flags (its description's nodeOptions): the ticks run as deployed.
    nodeFlags: PACER_NODE_OPTIONS,
  },
  sim: {
    options: {
      '--campaigns N': 'campaigns in the simulated day (default 1000)',
      '--requests N': 'auctioned requests in the day (default 10000000)',
      '--hours N': 'simulated hours (default 24)',
    },
    load: () => import('./sim.js'),
    target: 'its own redis-server (standalone, loopback)',
    // The simulator's process, as `npm run sim` runs it (cli/common.ts ensureSimProcess).
    simProcess: true,
  },
};

function usage(): string {
  const lines = Object.entries(benchmarks).flatMap(([name, b]) => [
    `  ${name}   against ${b.target}`,
    ...Object.entries(b.options).map(([o, d]) => `      ${o.padEnd(38)} ${d}`),
    ...(benchTargets[name] ?? []).map(
      (t) => `      target: ${t.metric} ${t.op} ${t.value}  (${t.description})`,
    ),
  ]);
  return `usage: npm run bench -- <${Object.keys(benchmarks).join('|')}> [options] [--debug]
Runs one benchmark on this machine; progress on stderr, the result as one JSON line on stdout
(with "verdicts" per target and "warnings" when an offered rate was not sustained).
${lines.join('\n')}
exit codes: 0 every target met, 7 a target missed (see verdicts), 2 usage, 1 unexpected failure`;
}

// A benchmark stopped with `kill` must not leave its redis-servers behind.
killServersOnSignal();
const argv = process.argv.slice(2);
const debug = argv.includes('--debug');
const [name, ...rawArgs] = argv.filter((a) => a !== '--debug');
if (name === '--help' || name === '-h' || rawArgs.includes('--help') || rawArgs.includes('-h')) {
  console.log(usage());
  process.exit(EXIT.ok);
}
const bench = name ? benchmarks[name] : undefined;
if (!bench) {
  console.error(
    `bench: ${name ? `unknown benchmark "${name}"` : 'name a benchmark'} (npm run bench -- --help)`,
  );
  process.exit(EXIT.usage);
}
const known = new Set(Object.keys(bench.options).map((o) => o.split(' ')[0]));
const unknown = rawArgs.find((a) => a.startsWith('--') && !known.has(a));
if (unknown) {
  console.error(`bench ${name}: unknown option ${unknown} (npm run bench -- --help)`);
  process.exit(EXIT.usage);
}
if (bench.simProcess) await ensureSimProcess();
if (bench.nodeFlags) await ensureNodeFlags(bench.nodeFlags);
console.error(`bench ${name}: target ${bench.target}; never AWS`);
try {
  const result = await (await bench.load()).run(rawArgs);
  const v = verdicts(name as string, result);
  const warnings = unsustainedRates(result);
  for (const x of v)
    console.error(
      `bench ${name}: ${x.pass ? 'PASS' : 'FAIL'} ${x.metric} = ${x.measured ?? 'missing'} (target ${x.target})`,
    );
  for (const w of warnings) console.error(`bench ${name}: WARNING ${w}`);
  console.log(
    JSON.stringify({ benchmark: name, at: new Date().toISOString(), ...result, verdicts: v, warnings }),
  );
  process.exit(v.every((x) => x.pass) ? EXIT.ok : EXIT.verdictFailed);
} catch (error) {
  console.error(
    `bench ${name}: ${(error as Error)?.name ?? 'Error'}: ${String((error as Error)?.message ?? error).split('\n')[0]}`,
  );
  if (debug) console.error(error);
  process.exit(error instanceof RangeError ? EXIT.usage : EXIT.failure);
}
