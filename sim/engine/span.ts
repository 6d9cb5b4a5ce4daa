/**
 * The simulated span of one strategy's run, and the loop that drives a run over it second by
 * second — the same for one region (sim/runner.ts) and several (sim/regions/engine.ts).
 */
import type { Scenario } from '../scenario.js';
import type { StrategyName } from '../strategies.js';
import { NOTICE_BATCH_MS } from './notices.js';

/** Where a run starts, stops bidding and stops (epoch ms). */
export interface RunSpan {
  /** First simulated second: Paceline learns from the history days; the baselines, which learn nothing, start on the first scored day. */
  readonly startMs: number;
  /** End of bidding: the scenario's end, or the run's `untilMs` when earlier. */
  readonly endMs: number;
  /** End of the run: the notices of the last auctions (up to 3× the longest delay, plus two batches) have landed. */
  readonly drainUntilMs: number;
}

/** The span of a run of `strategy` over `scenario`, cut at `untilMs` when given. */
export function runSpan(scenario: Scenario, strategy: StrategyName, untilMs?: number): RunSpan {
  const endMs = Math.min(scenario.endMs, untilMs ?? scenario.endMs);
  return {
    startMs: strategy === 'paceline' ? scenario.startMs : scenario.scoredStartMs,
    endMs,
    drainUntilMs: endMs + scenario.notices.maxDelayMs * 3 + 2 * NOTICE_BATCH_MS,
  };
}

/** A run the loop can drive: one simulated second at a time over its span, then its result. */
export interface SecondBySecondRun<R> {
  readonly span: RunSpan;
  second(nowMs: number): Promise<void>;
  finish(): Promise<R>;
}

/** Runs every second of `run`'s span in order, then returns what it finishes with. */
export async function runEverySecond<R>(run: SecondBySecondRun<R>): Promise<R> {
  for (let now = run.span.startMs; now < run.span.drainUntilMs; now += 1000) await run.second(now);
  return run.finish();
}
