/**
 * `npm run sim -- --scenario FILE [--strategy S …] [--seed N] [--json] [--html OUT] [--full-speed] [--help]`
 *
 * Replays a scenario's days of auctions against the real pacing path on a local redis-server this
 * command starts (never anything remote), once per strategy on the same seed, and prints the
 * pacing-quality report. Exit codes: 0 done, 2 bad usage or invalid scenario, 1 the simulation
 * failed (redis-server missing, an unexpected error).
 */

import { readFileSync, writeFileSync } from 'node:fs';
import { ensureSimProcess } from '../cli/common.js';
import { killServersOnSignal, type RunningRedis, startRedis } from '../local/emulators/redis.js';
import { PacelineError } from '../shared/errors.js';
import { connectRedis, type RedisClient } from '../shared/redis/connect.js';
import { ManualClock } from '../shared/time/clock.js';
import { flightsOf } from './flights.js';
import { fullSpeedAgainstAsap } from './full-speed.js';
import { renderHtml } from './html.js';
import { type RegionProbe, runRegions } from './regions/engine.js';
import { campaignRows, ceilingOnlyOf, fillableOf, type SimJson, simJson } from './report.js';
import { runStrategy, type StrategyRun } from './runner.js';
import { parseScenario, type Scenario, ScenarioError } from './scenario.js';
import { isStrategy, STRATEGIES, type StrategyName } from './strategies.js';

const HELP = `Usage: npm run sim -- --scenario FILE [--strategy S …] [--seed N] [--json] [--html OUT]
                      [--full-speed]

Replays the scenario's days of auctions against the real pacer (controller, fenced publish),
PacingReader, BudgetGuard and SpendTracker on a local redis-server started for the run, on a
simulated clock; deterministic for a seed.

  --scenario FILE   scenario JSON (format: docs/pacing-quality.md; shipped: sim/scenarios/)
  --strategy S      paceline | asap | slots | linear; repeatable (default: all four). ASAP is
                    always run too: it defines the fillable campaigns.
  --seed N          overrides the scenario's seed (the market's, and a generated portfolio's)
  --json            the last stdout line is one JSON object (the summary per strategy)
  --html OUT        writes a self-contained report page with charts to OUT
  --full-speed      per strategy, what the fillable campaigns it left under 98 % spent at full
                    speed against ASAP's run over the same intervals (sim/full-speed.ts)
  --help            this text

Exit codes: 0 done, 2 bad usage or invalid scenario, 1 the simulation failed.`;

class UsageError extends PacelineError {
  override readonly name = 'UsageError';
  override readonly code = 'sim.usage';
}

interface Args {
  scenario: string;
  strategies: StrategyName[];
  seed: number | undefined;
  json: boolean;
  html: string | undefined;
  fullSpeed: boolean;
}

function parseArgs(argv: readonly string[]): Args | 'help' {
  const out: Args = {
    scenario: '',
    strategies: [],
    seed: undefined,
    json: false,
    html: undefined,
    fullSpeed: false,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    const value = () => {
      const v = argv[++i];
      if (v === undefined || v.startsWith('--')) throw new UsageError(`${a} needs a value (see --help).`);
      return v;
    };
    if (a === '--help' || a === '-h') return 'help';
    else if (a === '--scenario') out.scenario = value();
    else if (a === '--strategy') {
      const s = value();
      if (!isStrategy(s)) throw new UsageError(`unknown strategy ${s}: use ${STRATEGIES.join(', ')}.`);
      if (!out.strategies.includes(s)) out.strategies.push(s);
    } else if (a === '--seed') {
      const n = Number(value());
      if (!Number.isInteger(n) || n < 0 || n > 2 ** 31 - 1)
        throw new UsageError('--seed must be an integer in [0, 2^31 − 1].');
      out.seed = n;
    } else if (a === '--json') out.json = true;
    else if (a === '--html') out.html = value();
    else if (a === '--full-speed') out.fullSpeed = true;
    else throw new UsageError(`unknown argument ${a} (see --help).`);
  }
  if (!out.scenario) throw new UsageError('--scenario FILE is required (see --help).');
  if (out.strategies.length === 0) out.strategies = [...STRATEGIES];
  return out;
}

/** Loads and validates a scenario file (`seed` overrides its seed, a generated portfolio's too). */
export function loadScenario(file: string, seed?: number): Scenario {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new UsageError(`cannot read ${file}: ${(error as Error).message}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new ScenarioError(file, `not valid JSON: ${(error as Error).message}`);
  }
  return parseScenario(parsed, seed === undefined ? {} : { seed });
}

/** Options of {@link simulate}. */
export interface SimulateOptions {
  readonly strategies: readonly StrategyName[];
  readonly seed?: number;
  readonly series?: boolean;
  readonly onProgress?: (line: string) => void;
  /**
   * An existing Redis to use (flushed before each strategy); else a redis-server is started. Not
   * used with several regions: each gets a redis-server of its own.
   */
  readonly redis?: RedisClient;
  /** Several regions: called every simulated minute of each run (tests: invariants across caches). */
  readonly onMinute?: (
    strategy: StrategyName,
    nowMs: number,
    regions: readonly RegionProbe[],
  ) => Promise<void> | void;
}

/** Starts a local redis-server and connects to it (the simulator's target). */
async function localRedis(): Promise<{ server: RunningRedis; redis: RedisClient }> {
  const server = await startRedis();
  const port = Number(server.nodes[0]?.split(':')[1]);
  const redis = connectRedis({ mode: 'standalone', nodes: [{ host: '127.0.0.1', port }], tls: false });
  return { server, redis };
}

/**
 * Runs the strategies of a scenario (ASAP included) one after another, each from empty Redis: one
 * redis-server, or with several regions one per region (each region's cache; `options.redis` is
 * then not used).
 */
export async function simulate(
  scenario: Scenario,
  options: SimulateOptions,
): Promise<{ runs: StrategyRun[]; json: SimJson }> {
  const strategies: StrategyName[] = [...options.strategies];
  if (!strategies.includes('asap')) strategies.push('asap');
  const order = STRATEGIES.filter((s) => strategies.includes(s));
  const started: { server: RunningRedis; redis: RedisClient }[] = [];
  const servers = scenario.regions?.length ?? (options.redis ? 0 : 1);
  for (let i = 0; i < servers; i++) {
    const local = await localRedis();
    started.push(local);
    const name = scenario.regions?.[i]?.name;
    options.onProgress?.(
      `redis-server ${local.server.nodes[0]} (local, started for this run${name ? `: region ${name}` : ''})`,
    );
  }
  const redis = scenario.regions
    ? started.map((s) => s.redis)
    : [options.redis ?? (started[0]?.redis as RedisClient)];
  const seed = options.seed ?? scenario.seed;
  try {
    const runs: StrategyRun[] = [];
    for (const strategy of order) {
      for (const r of redis) await r.flushall();
      const common = {
        clock: new ManualClock(scenario.startMs),
        scenario,
        strategy,
        seed,
        ...(options.series ? { series: true } : {}),
        ...(options.onProgress ? { onProgress: options.onProgress } : {}),
      };
      runs.push(
        scenario.regions
          ? await runRegions({
              ...common,
              redis,
              ...(options.onMinute
                ? { onMinute: (now, probes) => options.onMinute?.(strategy, now, probes) }
                : {}),
            })
          : await runStrategy({ ...common, redis: redis[0] as RedisClient }),
      );
    }
    return { runs, json: simJson(scenario.name, seed, runs, ceilingOnlyOf(scenario), flightsOf(scenario)) };
  } finally {
    for (const s of started) {
      s.redis.disconnect();
      await s.server.stop();
    }
  }
}

const pct = (x: number | null) => (x === null ? '—' : `${(x * 100).toFixed(2)}%`);

function printTable(json: SimJson, runs: readonly StrategyRun[]): void {
  const fillable = fillableOf(runs.find((r) => r.strategy === 'asap') as StrategyRun);
  const pace = runs.find((r) => r.strategy === 'paceline') ?? runs[0];
  if (pace) {
    console.log(`\nper campaign-day (${pace.strategy}):`);
    console.log(
      'campaign                day         fill  util     over     maxDev  rmsDev  alive  imps     lostOwn  cpm-µ$  cpc-µ$',
    );
    for (const r of campaignRows(pace, fillable)) {
      console.log(
        [
          r.campaignId.padEnd(22),
          r.day.padEnd(11),
          (r.fillable ? 'yes' : 'no').padEnd(5),
          pct(r.utilisation).padEnd(8),
          pct(r.overspend).padEnd(8),
          pct(r.maxDeviation).padEnd(7),
          pct(r.rmsDeviation).padEnd(7),
          String(r.minutesAlive).padEnd(6),
          String(r.impressions).padEnd(8),
          pct(r.lostToOwnShare).padEnd(8),
          String(r.costPerImpression).padEnd(7),
          String(r.costPerClick ?? '—'),
        ].join(' '),
      );
    }
  }
  console.log(
    '\nstrategy   minUtil(fill) <95%(fill) meanUtil overMax  >0.5%  maxDev(fill) lostOwn(fill) cost/imp µ$',
  );
  for (const [name, s] of Object.entries(json.strategies)) {
    console.log(
      [
        name.padEnd(10),
        pct(s.utilisationMinFillable).padEnd(13),
        String(s.campaignsUnder95Fillable).padEnd(10),
        pct(s.utilisationMean).padEnd(8),
        pct(s.overspendMax).padEnd(8),
        String(s.campaignsOverBudget).padEnd(6),
        pct(s.deviationMax).padEnd(12),
        pct(s.lostToOwnShareFillable).padEnd(13),
        String(s.costPerImpression),
      ].join(' '),
    );
  }
  for (const [name, s] of Object.entries(json.strategies)) {
    if (!s.regions) continue;
    console.log(`\nper region (${name}; the rows above are the combined figures):`);
    console.log(
      'region        requests   spend share  maxDev(fill, own curve)  alloc holds  alloc no-budget  authority age max  lost min  granted $  reclaimed $',
    );
    for (const [region, r] of Object.entries(s.regions)) {
      console.log(
        [
          region.padEnd(13),
          String(r.requests).padEnd(10),
          pct(r.spendShare).padEnd(12),
          pct(r.deviationMaxFillable).padEnd(24),
          String(r.allocationHolds).padEnd(12),
          String(r.allocationRefusals).padEnd(16),
          `${r.authorityAgeMaxSeconds} s`.padEnd(18),
          String(r.lostMinutes).padEnd(9),
          (r.grantedMicros / 1e6).toFixed(2).padEnd(10),
          (r.reclaimedMicros / 1e6).toFixed(2),
        ].join(' '),
      );
    }
  }
  console.log(
    `\n${json.requests} requests in ${json.wallSeconds} s wall (${json.auctionsPerSec}/s), CPU ${json.cpuSeconds} s node + ${json.redisCpuSeconds} s redis-server`,
  );
}

/** `--full-speed`: each paced strategy's full-speed spend against ASAP's (sim/full-speed.ts). */
function printFullSpeed(runs: readonly StrategyRun[]): void {
  const asap = runs.find((r) => r.strategy === 'asap') as StrategyRun;
  const fillable = fillableOf(asap);
  for (const run of runs) {
    if (run === asap) continue;
    const { rows, ratio } = fullSpeedAgainstAsap(run, asap, fillable);
    console.log(
      `\nfull speed (${run.strategy}; fillable campaign-days under 98 %, intervals at throttle 1 and multiplier 1, ASAP not yet at its cap): ` +
        `spend against ASAP's over the same intervals ${ratio ?? '—'}`,
    );
    for (const r of rows)
      console.log(
        `  ${r.campaignId.padEnd(22)} ${r.day}  $${(r.budgetMicros / 1e6).toFixed(2).padEnd(9)} ${String(r.intervals).padEnd(4)} intervals  ` +
          `${pct(r.pacedMicros / r.budgetMicros)} against ${pct(r.asapMicros / r.budgetMicros)} of the budget`,
      );
  }
}

/** The CLI; returns the exit code (0 done, 2 usage or scenario error). */
export async function main(argv: readonly string[]): Promise<number> {
  let args: Args | 'help';
  let scenario: Scenario;
  try {
    args = parseArgs(argv);
    if (args === 'help') {
      console.log(HELP);
      return 0;
    }
    scenario = loadScenario(args.scenario, args.seed);
  } catch (error) {
    if (error instanceof UsageError || error instanceof ScenarioError) {
      console.error(`sim: ${error.message}`);
      return 2;
    }
    throw error;
  }
  const seed = args.seed ?? scenario.seed;
  console.log(
    `sim: scenario ${scenario.name} (${args.scenario}), seed ${seed}, strategies ${args.strategies.join(', ')}; ` +
      `days ${[...scenario.historyDays.map((d) => `${d} (history)`), ...scenario.scoredDays].join(', ')}; ` +
      'target: a local redis-server started for this run',
  );
  const { runs, json } = await simulate(scenario, {
    strategies: args.strategies,
    seed,
    series: args.html !== undefined || args.fullSpeed,
    onProgress: (line) => process.stderr.write(`[sim] ${line}\n`),
  });
  printTable(json, runs);
  if (args.fullSpeed) printFullSpeed(runs);
  if (args.html) {
    writeFileSync(args.html, renderHtml(json, runs));
    console.log(`html report: ${args.html}`);
  }
  if (args.json) console.log(JSON.stringify(json));
  return 0;
}

if (process.argv[1] && import.meta.url === new URL(`file://${process.argv[1]}`).href) {
  killServersOnSignal();
  ensureSimProcess()
    .then(() => main(process.argv.slice(2)))
    .then(
      (code) => process.exit(code),
      (error: unknown) => {
        console.error(`sim: ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}`);
        process.exit(1);
      },
    );
}
