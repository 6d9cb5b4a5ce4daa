/**
 * `npm run demo`: seeds demo accounts, campaigns and plans into a running local region and drives
 * continuous traffic into it (bids through the budget guard, wins, losses, impressions, clicks,
 * an occasional poison record) until Ctrl-C. The target comes from the environment `npm start`
 * prints for each region; the demo never runs against AWS.
 */

import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { EXIT } from '../../cli/common.js';
import { quietSdkNodeWarning } from '../../shared/aws/endpoints.js';
import { errorKind } from '../../shared/errors.js';
import { DemoTargetError, demoTargetFromEnv, describeDemoTarget } from './target.js';
import { type DemoStats, EARLY_WINDOW_MS, startDemoTraffic } from './traffic.js';

/** What the command line chose. */
export interface DemoArgs {
  readonly help: boolean;
  readonly requestsPerSec: number;
  readonly poisonEverySec: number;
  readonly accounts: number;
  readonly campaignsPerAccount: number;
  readonly winRate: number;
  /** Stop after this many seconds; undefined = until Ctrl-C. */
  readonly durationSec: number | undefined;
  readonly seed: number | undefined;
  /** Seconds between progress lines. */
  readonly reportEverySec: number;
}

/** Wrong command line: exit 2, one line. */
export class DemoUsageError extends errorKind('DemoUsageError', 'demo.usage') {}

export const DEMO_HELP = `Usage: npm run demo -- [options]

Seeds demo accounts, campaigns and budget plans into a running local region and drives traffic
into it until Ctrl-C: bid requests paced by the published parameters and the budget guard, bids,
wins and losses on the spend stream, impressions and clicks on the actions stream, and one
poison record now and then (it lands in the dead-letter table).

Target: the local region named by the environment \`npm start\` prints ("Client env") — e.g.
  source .paceline/us-east-1.env && npm run demo
The demo refuses to run without a local endpoint: it never reaches AWS.

Options:
  --rate N            bid requests per second, all campaigns together (default 100)
  --win-rate P        share of bids that win, 0..1 (default 0.3)
  --poison-every S    one malformed record every S seconds; 0 = none (default 30)
  --accounts N        demo accounts (default 3)
  --campaigns N       campaigns per account (default 3)
  --duration S        stop after S seconds (default: run until Ctrl-C)
  --seed N            seed of the traffic's randomness (default: random)
  --report-every S    seconds between progress lines (default 5)
  --help              this text

Exit codes: 0 ok (stopped by Ctrl-C or --duration), 1 unexpected failure, 2 usage or no local target.`;

/** A numeric flag: its name on the command line, its default (none: unset) and its range. */
interface NumberFlag {
  readonly flag: string;
  readonly fallback: number | undefined;
  readonly min: number;
  readonly max: number;
  readonly whole: boolean;
}

/** The {@link DemoArgs} fields the numeric flags set. */
type NumberField = Exclude<keyof DemoArgs, 'help'>;

/**
 * Every flag but `--help`, once, keyed by the field it sets: what the command line accepts and how
 * each is checked. Keyed by field, so the compiler holds that every field has exactly one flag.
 */
const NUMBER_FLAGS: { readonly [F in NumberField]: NumberFlag } = {
  requestsPerSec: { flag: 'rate', fallback: 100, min: 0, max: 100_000, whole: false },
  winRate: { flag: 'win-rate', fallback: 0.3, min: 0, max: 1, whole: false },
  poisonEverySec: { flag: 'poison-every', fallback: 30, min: 0, max: 86_400, whole: false },
  accounts: { flag: 'accounts', fallback: 3, min: 1, max: 1_000, whole: true },
  campaignsPerAccount: { flag: 'campaigns', fallback: 3, min: 1, max: 100, whole: true },
  durationSec: { flag: 'duration', fallback: undefined, min: 1, max: 31_536_000, whole: false },
  seed: { flag: 'seed', fallback: undefined, min: 0, max: 2 ** 32 - 1, whole: true },
  reportEverySec: { flag: 'report-every', fallback: 5, min: 1, max: 3_600, whole: false },
};

function numberOf(
  { flag, fallback, min, max, whole }: NumberFlag,
  raw: string | undefined,
): number | undefined {
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (raw.trim() === '' || !Number.isFinite(n) || n < min || n > max || (whole && !Number.isInteger(n))) {
    throw new DemoUsageError(
      `--${flag} takes ${whole ? 'a whole number' : 'a number'} from ${min} to ${max}, got '${raw}'`,
    );
  }
  return n;
}

/** Parses the demo's command line; throws {@link DemoUsageError}. */
export function parseDemoArgs(argv: readonly string[]): DemoArgs {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      options: {
        ...Object.fromEntries(Object.values(NUMBER_FLAGS).map((f) => [f.flag, { type: 'string' } as const])),
        help: { type: 'boolean' },
      },
    }));
  } catch (error) {
    throw new DemoUsageError(`${(error as Error).message} (see --help)`);
  }
  // Every DemoArgs field is a key of NUMBER_FLAGS (its type says so), so the object is whole.
  const args: Record<string, number | boolean | undefined> = { help: values.help === true };
  for (const [field, f] of Object.entries(NUMBER_FLAGS))
    args[field] = numberOf(f, values[f.flag] as string | undefined);
  return args as unknown as DemoArgs;
}

/** One progress line. */
export function formatStats(s: Readonly<DemoStats>, elapsedSec: number): string {
  return (
    `${elapsedSec.toFixed(0)} s: ${s.requests} requests, ${s.bids} bids (${s.throttled} throttled, ${s.noBudget} no budget), ` +
    `${s.wins} wins $${(s.spentMicros / 1e6).toFixed(2)}, ${s.losses} losses, ${s.clicks} clicks, ${s.poison} poison` +
    (s.putErrors > 0 ? `, ${s.putErrors} records not put` : '')
  );
}

/**
 * The first-minutes line: no-budget answers in the first minutes to campaigns under 5 % of their
 * budget, and how many of them the region's allocation caused (0 expected: floors and fast first
 * allocations, docs/pacing.md "Many regions"; the rest are E(t) caps of campaigns created now).
 */
export function formatEarlyLine(s: Readonly<DemoStats>): string {
  return `first ${EARLY_WINDOW_MS / 60_000} min: ${s.earlyNoBudget} no-budget answers to campaigns under 5 % of their budget, ${s.earlyAllocationNoBudget} of them the allocation's`;
}

/** Runs the demo; resolves with the exit code. */
export async function runDemo(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
  out: { log(line: string): void; error(line: string): void } = console,
): Promise<number> {
  let args: DemoArgs;
  let target: ReturnType<typeof demoTargetFromEnv>;
  try {
    args = parseDemoArgs(argv);
    if (args.help) {
      out.log(DEMO_HELP);
      return EXIT.ok;
    }
    target = demoTargetFromEnv(env);
  } catch (error) {
    if (error instanceof DemoUsageError || error instanceof DemoTargetError) {
      out.error(error.message);
      return EXIT.usage;
    }
    throw error;
  }
  out.log(describeDemoTarget(target));
  // Listening from the start: a Ctrl-C during seeding stops cleanly too. `on`, not `once`: Ctrl-C
  // reaches this process twice (from the terminal and relayed by npm/tsx), and a second SIGINT
  // without a listener would kill it mid-flush.
  const signals = ['SIGINT', 'SIGTERM'] as const;
  let onSignal = () => {};
  const stopRequested = new Promise<void>((resolve) => {
    onSignal = () => resolve();
    for (const s of signals) process.on(s, onSignal);
    if (args.durationSec !== undefined) setTimeout(resolve, args.durationSec * 1000).unref();
  });
  let lastError = '';
  out.log(`Seeding ${args.accounts} accounts × ${args.campaignsPerAccount} campaigns and their plans…`);
  const traffic = await startDemoTraffic({
    target,
    requestsPerSec: args.requestsPerSec,
    poisonEverySec: args.poisonEverySec,
    accounts: args.accounts,
    campaignsPerAccount: args.campaignsPerAccount,
    auction: { winRate: args.winRate },
    ...(args.seed === undefined ? {} : { seed: args.seed }),
    onError: (error) => {
      // One line per distinct failure: a region that went away must not flood the terminal.
      const line = `demo: ${(error as Error).message ?? String(error)}`;
      if (line !== lastError) out.error(line);
      lastError = line;
    },
  });
  out.log(
    `Seeded ${traffic.campaigns.length} campaigns (${traffic.campaigns.map((c) => c.campaignId).join(', ')}); ` +
      `${args.requestsPerSec} requests/s${args.durationSec === undefined ? ' until Ctrl-C' : ` for ${args.durationSec} s`}.`,
  );
  const started = Date.now();
  const report = setInterval(
    () => out.log(formatStats(traffic.stats, (Date.now() - started) / 1000)),
    args.reportEverySec * 1000,
  );
  let earlyReported = false;
  const early = setTimeout(() => {
    earlyReported = true;
    out.log(formatEarlyLine(traffic.stats));
  }, EARLY_WINDOW_MS);
  await stopRequested;
  clearInterval(report);
  clearTimeout(early);
  if (!earlyReported) out.log(`${formatEarlyLine(traffic.stats)} (stopped before the window ended)`);
  out.log('Stopping: sending the pending notices, flushing the streams…');
  await traffic.stop();
  out.log(`Stopped. ${formatStats(traffic.stats, (Date.now() - started) / 1000)}`);
  for (const s of signals) process.off(s, onSignal);
  return EXIT.ok;
}

const invokedDirectly =
  process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href;
if (invokedDirectly) {
  quietSdkNodeWarning();
  runDemo(process.argv.slice(2), process.env).then(
    (code) => process.exit(code),
    (error: unknown) => {
      console.error(`demo failed: ${(error as Error).message ?? String(error)}`);
      process.exit(EXIT.failure);
    },
  );
}
