/**
 * `npx tsx sim/digest.ts --scenario FILE [--strategy S …] [--seed N]`: runs a scenario as
 * `npm run sim` does and prints one JSON line per strategy with the SHA-256 of its full result —
 * every plan-day's figures (spend, counters, charges, impressions, deviations, max-ahead, minutes
 * alive, …) in a fixed order, without wall-clock times. Two versions of the code behave the same on
 * a scenario exactly when their digests are equal (the simulator is deterministic: a result
 * depends on scenario and seed only, docs/pacing-quality.md "Deterministic whatever the host's
 * timing"); docs/pacing-quality.md, "Digests", lists the shipped scenarios' digests.
 */
import { createHash } from 'node:crypto';
import { parseArgs } from 'node:util';
import { loadScenario, simulate } from './main.js';
import type { StrategyRun } from './runner.js';

/**
 * The digest of one strategy's run: SHA-256 (hex) of its plan-day results, the diagnostics left
 * out (series; the lost bids' split between our own bids and the market, which counts the same
 * auctions the outcome came from).
 */
export function runDigest(run: Pick<StrategyRun, 'plans' | 'errors'>): string {
  const h = createHash('sha256');
  const rows = [...run.plans]
    .map(({ series: _series, lostToOwn: _own, lostToMarket: _market, ...p }) => p)
    .sort((a, b) => a.plan.localeCompare(b.plan) || a.day.localeCompare(b.day));
  for (const p of rows) h.update(`${JSON.stringify(p, Object.keys(p).sort())}\n`);
  h.update(`errors ${run.errors.length}\n`);
  return h.digest('hex');
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      scenario: { type: 'string' },
      strategy: { type: 'string', multiple: true },
      seed: { type: 'string' },
    },
  });
  if (!values.scenario) {
    console.error('usage: npx tsx sim/digest.ts --scenario FILE [--strategy S …] [--seed N]');
    return 2;
  }
  const seed = values.seed === undefined ? undefined : Number(values.seed);
  const scenario = loadScenario(values.scenario, seed);
  const { runs } = await simulate(scenario, {
    strategies: (values.strategy ?? ['paceline']) as Parameters<typeof simulate>[1]['strategies'],
    ...(seed === undefined ? {} : { seed }),
  });
  for (const run of runs) {
    console.log(
      JSON.stringify({
        scenario: scenario.name,
        seed: seed ?? scenario.seed,
        strategy: run.strategy,
        planDays: run.plans.length,
        digest: runDigest(run),
      }),
    );
  }
  return 0;
}

if (process.argv[1] && import.meta.url === new URL(`file://${process.argv[1]}`).href) {
  main().then(
    (code) => process.exit(code),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
