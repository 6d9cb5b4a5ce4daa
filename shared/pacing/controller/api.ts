/**
 * The controller interface: what the pacer function (publisher), the simulator and the tests
 * call every tick for every plan. Implementations are pure: a step is a function of
 * (input, previous state, forecast) with the time inside the input — no I/O, no clock reads, no
 * randomness — so the simulator can drive the very same code on a simulated clock, and a new
 * leader that reads the published state continues exactly where the old one stopped.
 *
 * Storage is the caller's job: `state` is carried from tick to tick (published beside the
 * parameters, docs/pacing.md), `forecast` changes rarely (at most hourly) and is stored apart.
 * Pass back the very `state` and `forecast` objects a step returned (not re-decoded copies) while
 * the process holds them: the controller keeps its curve memo on the state object, so a step is a
 * few µs and an unchanged curve comes back as the identical object. Decode only after a restart or
 * a leader change (the first step then rebuilds the curve from state + forecast, bit-identical).
 */
import type { ResolvedPlan } from '../../budget/model.js';
import type { DayWindow } from '../../budget/time-zone.js';
import type { PlanPacingParams, PlanSpendSnapshot } from '../types.js';

/** Everything one tick of one plan depends on. */
export interface PlanTickInput {
  /** The plan (level, ids, daily budget, pacing mode, time zone). */
  readonly plan: ResolvedPlan;
  /** The plan's current advertiser-local day. */
  readonly day: DayWindow;
  /** Live spend of the plan-day now. */
  readonly spend: PlanSpendSnapshot;
  /** The tick's instant (epoch ms, from the caller's injected clock). */
  readonly nowMs: number;
  /**
   * What the plan must spend by the end of the day: its daily budget, or this region's share of
   * it when several regions serve the plan. @default plan.dailyBudgetMicros
   */
  readonly budgetMicros?: number;
  /**
   * Where a plan with no forecast level of its own gets a prior forecast (the controller's
   * {@link PriorBook}, docs/pacing.md "Prior for new plans"). Called at most on a plan-day's first
   * tick, and only for such plans; the result is stored as the plan's forecast. Absent or
   * returning undefined: the controller's built-in prior.
   */
  readonly prior?: PriorLookup | undefined;
}

/** A prior forecast for a plan (in the controller's forecast type), or undefined. */
export type PriorLookup = (plan: ResolvedPlan, nowMs: number) => unknown;

/** Aggregates of the plans' learned forecasts, from which new plans get their priors. */
export interface PriorBook {
  /**
   * Brings the aggregates up to date from the forecasts the caller holds (cheap when nothing is
   * due: it rebuilds at most every so often). Call once per tick, before the steps.
   */
  refresh(nowMs: number, plans: Iterable<{ readonly plan: ResolvedPlan; readonly forecast: unknown }>): void;
  /** The lookup to pass as {@link PlanTickInput.prior}. */
  readonly lookup: PriorLookup;
}

/** Result of one tick of one plan. */
export interface PlanStep<S, F> {
  readonly params: PlanPacingParams;
  /** State to pass as `previous` next tick (small: it is written every tick). */
  readonly state: S;
  /** The forecast to keep; the same reference as the input when it did not change. */
  readonly forecast: F | undefined;
}

/** A pacing controller (the real one, or a baseline for the simulator). */
export interface PacingController<S = unknown, F = unknown> {
  /** Short name (reports, metrics). */
  readonly name: string;
  /** One tick of one plan. Pure. Throws `PacingInputError` / `UnknownPacingModeError` per plan. */
  step(input: PlanTickInput, previous: S | undefined, forecast: F | undefined): PlanStep<S, F>;
  /** Compact string form of a state (stored every tick). */
  encodeState(state: S): string;
  /**
   * Parses {@link encodeState}'s output; undefined when unreadable (then the plan starts afresh).
   * Throws `UnknownPacingModeError` (shared/pacing/modes.ts) for a state of a mode this version
   * does not know: the caller gives the plan the fail-safe and keeps the stored text.
   * `held`: the state the caller holds for the same plan, if any (a warm instance taking over):
   * the controller may reuse what it derived from it (its curve) when the decoded state agrees.
   */
  decodeState(raw: string, held?: S): S | undefined;
  /** Compact string form of a forecast. */
  encodeForecast(forecast: F): string;
  /** Parses {@link encodeForecast}'s output; undefined when unreadable. */
  decodeForecast(raw: string): F | undefined;
  /** A new book of priors for plans without a forecast of their own (controllers that learn). */
  createPriorBook?(): PriorBook;
}
