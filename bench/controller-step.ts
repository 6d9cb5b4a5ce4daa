/**
 * Micro-benchmark of the pacing controller's `step` (pure CPU, no Redis): N plans across several
 * time zones, stepped tick after tick through a simulated day with spend following the curve, the
 * way the pacer calls it. Reports the cost per step in steady state and on the day's first tick
 * (curve building), the encode/decode cost of state and forecast, and the encoded sizes.
 *
 *   npx tsx bench/controller-step.ts [--plans 100000] [--ticks 60]
 *
 * Prints one JSON line. The pacer's budget is 100,000 plans read + computed + published in
 * ≤ 2 s per tick (issue 9), so `step` must stay at a few µs.
 */
import { parseArgs } from 'node:util';
import { type PacingMode, type ResolvedPlan, resolvePlan } from '../shared/budget/model.js';
import { type DayWindow, dayWindow } from '../shared/budget/time-zone.js';
import type { ControllerState, TrafficForecast } from '../shared/pacing/controller/index.js';
import { createPacingController } from '../shared/pacing/controller/index.js';
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
  day: DayWindow;
  state: ControllerState | undefined;
  forecast: TrafficForecast | undefined;
  spent: number;
}

const start = Date.parse('2026-11-21T12:00:00Z');
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
  slots.push({ plan, day: dayWindow(start, tz), state: undefined, forecast: undefined, spent: 0 });
}

function tick(now: number): number {
  const t0 = process.hrtime.bigint();
  for (const s of slots) {
    const spend: PlanSpendSnapshot = {
      initialised: true,
      confirmedMicros: s.spent,
      inFlightMicros: Math.floor(s.spent * 0.001),
      leasedMicros: 0,
    };
    const r = ctl.step({ plan: s.plan, day: s.day, spend, nowMs: now }, s.state, s.forecast);
    s.state = r.state;
    s.forecast = r.forecast;
    // Spend grows by what the throttle lets through of a notional demand (keeps the loop moving).
    s.spent += Math.floor(
      r.params.throttle * r.params.bidMultiplier * s.plan.dailyBudgetMicros * 0.0002 * random(),
    );
  }
  return Number(process.hrtime.bigint() - t0) / N;
}

const firstNs = tick(start);
const steady: number[] = [];
for (let k = 1; k <= TICKS; k++) steady.push(tick(start + k * 10_000));
steady.sort((a, b) => a - b);

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
const states = slots.map((s) => s.state as ControllerState);
const encoded = states.map((s) => ctl.encodeState(s));
const bytes = Math.max(...encoded.map((e) => e.length));
const encodeNs = timed(states, (s) => ctl.encodeState(s));
const decodeNs = timed(encoded, (e) => ctl.decodeState(e));
// A decoded state has no memo: the first step after a leader change rebuilds the curve.
const decoded = encoded.map((e) => ctl.decodeState(e));
const t0 = process.hrtime.bigint();
slots.forEach((s, i) => {
  ctl.step(
    {
      plan: s.plan,
      day: s.day,
      spend: { initialised: true, confirmedMicros: s.spent, inFlightMicros: 0, leasedMicros: 0 },
      nowMs: start + (TICKS + 1) * 10_000,
    },
    decoded[i],
    s.forecast,
  );
});
const afterTakeoverNs = Number(process.hrtime.bigint() - t0) / N;
const forecastBytes = slots[1]?.forecast ? ctl.encodeForecast(slots[1].forecast).length : 0;

console.log(
  JSON.stringify({
    benchmark: 'controller-step',
    plans: N,
    ticks: TICKS,
    stepNsMedian: Math.round(steady[Math.floor(steady.length / 2)] as number),
    stepNsP90: Math.round(steady[Math.floor(steady.length * 0.9)] as number),
    firstTickNsPerPlan: Math.round(firstNs),
    firstTickAfterTakeoverNsPerPlan: Math.round(afterTakeoverNs),
    encodeStateNs: Math.round(encodeNs),
    decodeStateNs: Math.round(decodeNs),
    stateBytesMax: bytes,
    forecastBytes,
    msPerTickFor100kPlans: Math.round(((steady[Math.floor(steady.length / 2)] as number) * 100_000) / 1e6),
  }),
);
