/**
 * A warm instance taking over decodes the stored state with the state it holds for the plan
 * (`decodeState(raw, held)`): the decoded state carries `held`'s curve memo only when the two
 * agree on every input of the curve, `held`'s day profile only when they agree on the profile's,
 * and a step of it is the step a plain decode would give — the same parameters, the same curve
 * (bit for bit), the same next state.
 */
import { describe, expect, it } from 'vitest';
import { dayWindow } from '../../../shared/budget/time-zone.js';
import {
  type ControllerState,
  createPacingController,
  type TrafficForecast,
} from '../../../shared/pacing/controller/index.js';
import { StateRecord } from '../../../shared/pacing/controller/state.js';
import {
  type PlanAtDay,
  type PlanMemory,
  type PlanResult,
  stepPlans,
} from '../../../shared/pacing/plan-list.js';
import { SHAPES } from '../../../sim/market/index.js';
import { DAY, H, spendOf } from './fixture.js';
import { Plant, requestsForDemand, twinTraces } from './plant.js';

const ctl = createPacingController();
const opts = {
  budgetMicros: 10_000_000,
  requestsPerDay: requestsForDemand(3, 10_000_000),
  shape: SHAPES.noonPeak,
};

/** A plant run into its second day (a learned forecast, a shaped curve). */
function learned(): Plant<ControllerState, TrafficForecast> {
  const plant = new Plant(ctl, opts);
  plant.run(DAY.startMs, DAY.startMs + 36 * H);
  return plant;
}

/** One step of `plant`'s plan at `nowMs` from `state` and `forecast`. */
function stepOf(
  plant: Plant<ControllerState, TrafficForecast>,
  nowMs: number,
  state: ControllerState | undefined,
  forecast?: TrafficForecast,
) {
  return ctl.step(
    {
      plan: plant.plan,
      day: dayWindow(nowMs, 'UTC'),
      spend: spendOf(plant.confirmed, plant.inFlight),
      nowMs,
    },
    state,
    forecast,
  );
}

describe('decodeState with the state held for the plan', () => {
  it('a warm takeover every 97th tick continues bit for bit', () => {
    const b = new Plant(ctl, opts);
    let carried = 0;
    const traces = twinTraces(
      new Plant(ctl, opts),
      b,
      { from: DAY.startMs, to: DAY.startMs + 30 * H },
      97,
      () => {
        const held = b.state as ControllerState;
        b.state = ctl.decodeState(ctl.encodeState(held), held);
        if (StateRecord.memoOf(b.state as ControllerState) !== undefined) carried++;
      },
    );
    expect(traces.b).toEqual(traces.a);
    expect(carried).toBeGreaterThan(0);
  });

  it('carries the memo when the curve inputs agree: the next curve is the held one, as a plain decode builds it', () => {
    const plant = learned();
    const now = DAY.startMs + 36 * H;
    const held = plant.state as ControllerState;
    const text = ctl.encodeState(held);
    const warm = ctl.decodeState(text, held) as ControllerState;
    const cold = ctl.decodeState(text) as ControllerState;
    expect(StateRecord.memoOf(warm)).toBe(StateRecord.memoOf(held));
    expect(StateRecord.memoOf(cold)).toBeUndefined();
    const w = stepOf(plant, now, warm, plant.forecast);
    const c = stepOf(plant, now, cold, plant.forecast);
    expect(w.params.curve).toBe(plant.params?.curve);
    expect(w.params).toEqual(c.params);
    expect(ctl.encodeState(w.state)).toBe(ctl.encodeState(c.state));
  });

  it('another anchor or budget: the held profile only (the curve rebuilt, as a plain decode builds it)', () => {
    const plant = learned();
    const now = DAY.startMs + 36 * H;
    const held = plant.state as ControllerState;
    for (const v of [
      { anchorSec: held.anchorSec - 10 },
      { anchorMicros: held.anchorMicros + 1 },
      { budgetMicros: held.budgetMicros + 1 },
    ]) {
      const text = ctl.encodeState(new StateRecord({ ...held, ...v }));
      const warm = ctl.decodeState(text, held) as ControllerState;
      expect(StateRecord.memoOf(warm), JSON.stringify(v)).toBeUndefined();
      expect(StateRecord.heldMemoOf(warm)).toBe(StateRecord.memoOf(held));
      const w = stepOf(plant, now, warm, plant.forecast);
      const c = stepOf(plant, now, ctl.decodeState(text), plant.forecast);
      expect(w.params).toEqual(c.params);
      expect(ctl.encodeState(w.state)).toBe(ctl.encodeState(c.state));
    }
  });

  it('carries nothing across another day, mode, shape or pending observation of the day before', () => {
    const plant = learned();
    const held = plant.state as ControllerState;
    const variants: Partial<Record<keyof ControllerState, unknown>>[] = [
      { day: '2026-11-18' },
      { mode: 'asap' },
      { shape: (held.shape + 1) & 0xffffff },
      { pendSlot: 3, pendPrevDay: true, pendLevel: 200, pendCover: 32 },
    ];
    for (const v of variants) {
      const warm = ctl.decodeState(
        ctl.encodeState(new StateRecord({ ...held, ...v } as ControllerState)),
        held,
      );
      expect(StateRecord.memoOf(warm as ControllerState), JSON.stringify(v)).toBeUndefined();
      expect(StateRecord.heldMemoOf(warm as ControllerState), JSON.stringify(v)).toBeUndefined();
    }
    // Fields that are not curve inputs (the integral, the spend seen) do not stop it.
    const moved = new StateRecord({
      ...held,
      integral: held.integral - 7,
      lastCommitted: held.lastCommitted + 5,
    });
    expect(StateRecord.memoOf(ctl.decodeState(ctl.encodeState(moved), held) as ControllerState)).toBe(
      StateRecord.memoOf(held),
    );
  });

  it('a stored forecast of another shape re-anchors as a plain decode does, the carried memo notwithstanding', () => {
    const plant = learned();
    const now = DAY.startMs + 36 * H;
    const held = plant.state as ControllerState;
    const text = ctl.encodeState(held);
    // The predecessor's forecast (a decoded copy: another object) with other levels.
    const own = plant.forecast as TrafficForecast;
    const other = ctl.decodeForecast(
      ctl.encodeForecast({ ...own, hourOfDay: own.hourOfDay.map((q, h) => (q > 0 && h < 12 ? q + 40 : q)) }),
    ) as TrafficForecast;
    for (const stored of [
      text,
      ctl.encodeState(new StateRecord({ ...held, anchorSec: held.anchorSec - 10 })),
    ]) {
      const warm = stepOf(plant, now, ctl.decodeState(stored, held), other);
      const cold = stepOf(plant, now, ctl.decodeState(stored), other);
      expect(warm.params).toEqual(cold.params);
      expect(ctl.encodeState(warm.state)).toBe(ctl.encodeState(cold.state));
      expect(warm.state.anchorSec).toBe(Math.floor(now / 1000));
    }
  });
});

describe('stepPlans after a takeover loaded a forecast', () => {
  /** One plan's step with `memory`, the stored forecast text loaded; the forecast the controller got. */
  function stepLoaded(
    plant: Plant<ControllerState, TrafficForecast>,
    memory: PlanMemory,
    loaded: string,
  ): unknown {
    const nowMs = DAY.startMs + 36 * H;
    memory.loadedForecast = loaded;
    let given: unknown;
    const spy = {
      ...ctl,
      step: (
        input: Parameters<typeof ctl.step>[0],
        s: ControllerState | undefined,
        f: TrafficForecast | undefined,
      ) => {
        given = f;
        return ctl.step(input, s, f);
      },
    } as typeof ctl;
    const plan: PlanAtDay = {
      field: 'c/campaign',
      plan: plant.plan,
      day: dayWindow(nowMs, 'UTC'),
      spendKey: 'k',
      memory,
    };
    const results: PlanResult[] = [];
    const invalid = stepPlans(
      { controller: spy as never, prior: undefined, nowMs, onInvalid: () => {} },
      [plan],
      [spendOf(plant.confirmed, plant.inFlight)],
      undefined,
      results,
      0,
      1,
    );
    expect(invalid).toBe(0);
    expect(memory.loadedForecast).toBeUndefined();
    expect(memory.forecastText).toBe(ctl.encodeForecast(memory.forecast as TrafficForecast));
    return given;
  }

  it('keeps the forecast object it holds when the stored text is what it encodes to, else takes the stored one', () => {
    const plant = learned();
    const own = plant.forecast as TrafficForecast;
    const same: PlanMemory = { plan: plant.plan, state: plant.state, forecast: own };
    expect(stepLoaded(plant, same, ctl.encodeForecast(own))).toBe(own);
    const otherText = ctl.encodeForecast({
      ...own,
      hourOfDay: own.hourOfDay.map((q) => (q > 0 ? q + 1 : q)),
    });
    const differs: PlanMemory = { plan: plant.plan, state: plant.state, forecast: own };
    const given = stepLoaded(plant, differs, otherText);
    expect(given).not.toBe(own);
    expect(ctl.encodeForecast(given as TrafficForecast)).toBe(otherText);
    // Nothing held: the stored one, decoded.
    const none: PlanMemory = { plan: plant.plan, state: undefined, forecast: undefined };
    expect(ctl.encodeForecast(stepLoaded(plant, none, otherText) as TrafficForecast)).toBe(otherText);
  });
});
