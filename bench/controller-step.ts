/**
 * Micro-benchmark of the pacing controller (pure CPU, no Redis): N plans across several time
 * zones, each with a learned traffic forecast, stepped tick after tick the way the pacer calls
 * `step`. Reports ns per plan for
 * - a steady tick (the common case),
 * - the first tick of a plan-day (midnight: yesterday's last hour closed, the forecast folded,
 *   the day's curve built),
 * - the first tick after a leader change (states decoded from text: curves rebuilt),
 * - encoding and decoding a state,
 * and the encoded sizes. Machine-dependent figures, so a script, not a test:
 *
 *   npx tsx bench/controller-step.ts [--plans 100000] [--ticks 60]
 *
 * Prints one JSON line. The pacer's budget is 100,000 plans read + computed + published in
 * ≤ 2 s per tick (DESIGN.md "Performance targets"), so `step` must stay at a few µs.
 */
import { parseArgs } from 'node:util';
import { type PacingMode, type ResolvedPlan, resolvePlan } from '../shared/budget/model.js';
import { type DayWindow, dayWindow } from '../shared/budget/time-zone.js';
import { defaultControllerConfig } from '../shared/pacing/controller/config.js';
import {
  COVER_UNITS,
  EMPTY_FORECAST,
  quantiseLevel,
  withObservation,
} from '../shared/pacing/controller/forecast.js';
import {
  type ControllerState,
  createPacingController,
  type TrafficForecast,
} from '../shared/pacing/controller/index.js';
import type { PlanSpendSnapshot } from '../shared/pacing/types.js';
import { prng } from '../shared/random/prng.js';

const { values } = parseArgs({
  options: { plans: { type: 'string', default: '100000' }, ticks: { type: 'string', default: '60' } },
});
const N = Number(values.plans);
const TICKS = Number(values.ticks);
const zones = [
  'UTC',
  'America/Los_Angeles',
  'America/New_York',
  'Europe/Berlin',
  'Asia/Kolkata',
  'Pacific/Auckland',
];
const random = prng(42);
const ctl = createPacingController();

interface Slot {
  plan: ResolvedPlan;
  state: ControllerState | undefined;
  forecast: TrafficForecast | undefined;
  spent: number;
}

/** A forecast that has seen a few days of diurnal traffic (so day rolls fold and shape). */
function learnedForecast(tz: string, lastDay: string): TrafficForecast {
  let f = EMPTY_FORECAST;
  const end = Date.parse(`${lastDay}T12:00:00Z`);
  for (let d = 3; d >= 0; d--) {
    const day = dayWindow(end - d * 86_400_000, tz).day;
    for (let k = 0; k < 24; k++) {
      const level = quantiseLevel(1000 * (1.2 + Math.sin(((k - 6) * Math.PI) / 12)));
      f = withObservation(f, { day, slot: k, level, cover: COVER_UNITS }, tz, defaultControllerConfig);
    }
  }
  return f;
}

// Mid-day in every zone's local day, so the steady ticks and the roll are both inside one run.
const start = Date.parse('2026-11-21T12:00:00Z');
const forecasts = new Map(
  zones.map((tz) => [tz, learnedForecast(tz, dayWindow(start - 86_400_000, tz).day)]),
);
const slots: Slot[] = [];
for (let i = 0; i < N; i++) {
  const tz = zones[i % zones.length] as string;
  const mode: PacingMode = i % 10 === 0 ? 'asap' : 'even';
  const plan = resolvePlan(
    {
      level: 'campaign',
      accountId: `a${i % 5000}`,
      campaignId: `c${i}`,
      dailyBudgetMicros: Math.round(1_000_000 * 10 ** (random() * 4)),
      pacingMode: mode,
    },
    tz,
  );
  slots.push({ plan, state: undefined, forecast: forecasts.get(tz), spent: 0 });
}

/** Steps every plan at `now`; returns ns per plan. */
function tick(
  now: number,
  days: Map<string, DayWindow>,
  prepare?: (s: Slot) => ControllerState | undefined,
): number {
  const t0 = process.hrtime.bigint();
  for (const s of slots) {
    const spend: PlanSpendSnapshot = {
      initialised: true,
      confirmedMicros: s.spent,
      inFlightMicros: Math.floor(s.spent * 0.001),
      leasedMicros: 0,
    };
    const day = days.get(s.plan.timeZone) as DayWindow;
    const prev = prepare ? prepare(s) : s.state;
    const r = ctl.step({ plan: s.plan, day, spend, nowMs: now }, prev, s.forecast);
    s.state = r.state;
    s.forecast = r.forecast;
    // Spend grows with what the parameters let through of a notional demand (keeps the loop live).
    s.spent += Math.floor(
      r.params.throttle * r.params.bidMultiplier * s.plan.dailyBudgetMicros * 0.0002 * random(),
    );
  }
  return Number(process.hrtime.bigint() - t0) / N;
}

const windowsAt = (t: number) => new Map(zones.map((tz) => [tz, dayWindow(t, tz)]));

// 1. A plan-day's first tick for every plan (fresh plans with a learned forecast), then steady ticks.
const days0 = windowsAt(start);
const firstNs = tick(start, days0);
const steady: number[] = [];
for (let k = 1; k <= TICKS; k++) steady.push(tick(start + k * 10_000, days0));
steady.sort((a, b) => a - b);
const median = steady[Math.floor(steady.length / 2)] as number;

// 2. Midnight: every plan's next day (its zone's next local midnight), from yesterday's state.
const rolls: number[] = [];
for (const tz of zones) {
  const next = (days0.get(tz) as DayWindow).endMs;
  const group = slots.filter((s) => s.plan.timeZone === tz);
  const days = windowsAt(next);
  const t0 = process.hrtime.bigint();
  for (const s of group) {
    const r = ctl.step(
      {
        plan: s.plan,
        day: days.get(tz) as DayWindow,
        nowMs: next,
        spend: { initialised: true, confirmedMicros: 0, inFlightMicros: 0, leasedMicros: 0 },
      },
      s.state,
      s.forecast,
    );
    s.state = r.state;
    s.forecast = r.forecast;
    s.spent = 0;
  }
  rolls.push(Number(process.hrtime.bigint() - t0) / group.length);
}
const dayRollNs = rolls.reduce((a, b) => a + b, 0) / rolls.length;

/** ns per item of `fn` over `items`, best of 3 passes (the first pass includes JIT warm-up). */
function timed<T>(items: readonly T[], fn: (item: T) => unknown): number {
  let best = Number.POSITIVE_INFINITY;
  for (let pass = 0; pass < 3; pass++) {
    const t0 = process.hrtime.bigint();
    for (const item of items) fn(item);
    best = Math.min(best, Number(process.hrtime.bigint() - t0) / items.length);
  }
  return best;
}

// 3. Encode / decode, and the first tick of a new leader (decoded states: curves rebuilt).
const states = slots.map((s) => s.state as ControllerState);
const encoded = states.map((s) => ctl.encodeState(s));
const encodeNs = timed(states, (s) => ctl.encodeState(s));
const decodeNs = timed(encoded, (e) => ctl.decodeState(e));
let i = 0;
const afterRoll = Math.max(...[...windowsAt(start).values()].map((d) => d.endMs)) + 3_600_000;
const takeoverNs = tick(afterRoll, windowsAt(afterRoll), () => ctl.decodeState(encoded[i++] as string));

const forecastBytes = ctl.encodeForecast(slots[1]?.forecast as TrafficForecast).length;
console.log(
  JSON.stringify({
    benchmark: 'controller-step',
    plans: N,
    ticks: TICKS,
    stepNsMedian: Math.round(median),
    stepNsP90: Math.round(steady[Math.floor(steady.length * 0.9)] as number),
    firstTickNsPerPlan: Math.round(firstNs),
    dayRollNsPerPlan: Math.round(dayRollNs),
    takeoverNsPerPlan: Math.round(takeoverNs),
    encodeStateNs: Math.round(encodeNs),
    decodeStateNs: Math.round(decodeNs),
    stateBytesMax: Math.max(...encoded.map((e) => e.length)),
    stateBytesMean: Math.round(encoded.reduce((a, e) => a + e.length, 0) / encoded.length),
    forecastBytes,
    stepMsPerTickFor100kPlans: Math.round((median * 100_000) / 1e6),
  }),
);
