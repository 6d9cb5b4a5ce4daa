/**
 * Pacing modes as one registry (shared/pacing/modes.ts, docs/pacing.md "Adding a pacing mode"):
 *
 * - a mode added through the registry alone — an entry with its curve function — is accepted by
 *   the budget validator, the CLI (flag and help), the controller (its curve, its state code, a
 *   continued state bit-identical), the published contract's codec and the simulator (scenario
 *   files and every strategy's controller); once removed, each of them refuses it with an error
 *   that names it;
 * - every registered mode's guard default is its fail-safe curve, which is publishable;
 * - an unknown mode in a stored state is an error, never read as another mode; the fail-safe and
 *   the guard's default of an unknown mode are the linear day curve;
 * - registration refuses ids and state codes that would break the encodings or collide.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { CliUsageError, planFromFlags } from '../../../cli/budgets.js';
import { budgetsUsage } from '../../../cli/usage.js';
import { type PacingMode, resolvePlan, validatePlan } from '../../../shared/budget/model.js';
import { defaultCurve } from '../../../shared/budget/pacing.js';
import { dayWindow } from '../../../shared/budget/time-zone.js';
import { PacelineError } from '../../../shared/errors.js';
import {
  assertPublishable,
  decodeCampaignHash,
  encodeCurve,
  encodePlanParams,
  PacingDecodeError,
} from '../../../shared/pacing/codec.js';
import { linearDayCurve } from '../../../shared/pacing/controller/curve.js';
import { createPacingController, failSafeParams } from '../../../shared/pacing/controller/index.js';
import { decodeState, encodeState } from '../../../shared/pacing/controller/state.js';
import {
  findPacingMode,
  PacingModeDefinitionError,
  type PacingModeSpec,
  pacingModeIds,
  pacingModeOf,
  registerPacingMode,
  safeCurvesOf,
  UnknownPacingModeError,
} from '../../../shared/pacing/modes.js';
import { evaluateCurve, type PlanPacingParams } from '../../../shared/pacing/types.js';
import { parseScenario, ScenarioError } from '../../../sim/scenario.js';
import { controllerOf, STRATEGIES, slotsCurve } from '../../../sim/strategies.js';
import { RUSH } from '../../support/rush-mode.js';

const TZ = 'America/Los_Angeles';
const T0 = Date.parse('2026-11-21T09:00:00-08:00');

const MODE = 'rush' as PacingMode;

let removals: (() => void)[] = [];
afterEach(() => {
  for (const remove of removals) remove();
  removals = [];
});
const register = (spec: PacingModeSpec) => removals.push(registerPacingMode(spec));

const plan = (mode: PacingMode, budget = 1_000_000_000) =>
  resolvePlan(
    { level: 'campaign', accountId: 'a', campaignId: 'c', dailyBudgetMicros: budget, pacingMode: mode },
    TZ,
  );

const spend = (confirmedMicros: number) => ({
  initialised: true,
  confirmedMicros,
  inFlightMicros: 0,
  leasedMicros: 0,
});

/** Steps the production controller twice (fresh, then 10 s later) for a plan of `mode`. */
function twoSteps(mode: PacingMode) {
  const ctl = createPacingController();
  const p = plan(mode);
  const day = dayWindow(T0, TZ);
  const first = ctl.step({ plan: p, day, nowMs: T0, spend: spend(100_000_000) }, undefined, undefined);
  const next = (prev: typeof first.state) =>
    ctl.step({ plan: p, day, nowMs: T0 + 10_000, spend: spend(101_000_000) }, prev, first.forecast);
  return { ctl, p, day, first, next };
}

/** The campaign hash the publisher writes for one plan's parameters. */
function hashOf(params: PlanPacingParams, day: ReturnType<typeof dayWindow>) {
  return {
    v: '2',
    t: '1',
    at: String(T0),
    f: '1.1.1',
    by: 'test',
    plans: params.planId,
    [`p:${params.planId}`]: encodePlanParams(params, day),
    [`e:${params.planId}`]: encodeCurve(params.curve),
  };
}

const scenario = (pacingMode: string) => ({
  name: 'modes',
  timeZone: 'America/New_York',
  start: '2026-03-03',
  traffic: { requestsPerDay: 1000 },
  accounts: [
    {
      id: 'a',
      pacingMode,
      dailyBudget: 5,
      campaigns: [
        { id: 'c', dailyBudget: 1, pacingMode },
        { id: 'd', dailyBudget: 2, arms: [{ id: 'x', share: 1, dailyBudget: 1, pacingMode }] },
      ],
    },
  ],
});

describe('a pacing mode added through the registry alone', () => {
  it('is accepted by the budget validator and the CLI, whose help lists it', () => {
    register(RUSH);
    const flags = {
      level: 'campaign',
      account: 'a',
      campaign: 'c',
      'daily-budget': '10',
      pacing: 'rush',
    };
    const p = planFromFlags(flags);
    expect(p).toEqual({
      level: 'campaign',
      accountId: 'a',
      campaignId: 'c',
      dailyBudgetMicros: 10_000_000,
      pacingMode: 'rush',
    });
    expect(validatePlan(p)).toBe(p);
    expect(budgetsUsage()).toContain('[--pacing even|asap|ahead|asap-hourly|front-loaded|curve|rush]');
    expect(budgetsUsage()).toMatch(/^ {4}rush {9}the remainder over the first half/m);
    expect(() => planFromFlags({ ...flags, pacing: 'fast' })).toThrow(
      '--pacing "fast": use even, asap, ahead, asap-hourly, front-loaded, curve, rush.',
    );
  });

  it('is paced by the controller with its own curve, and its state continues bit for bit', () => {
    register(RUSH);
    const { first, next, day } = twoSteps(MODE);
    // The mode's curve function, anchored at the spend so far.
    const mid = T0 + Math.floor((day.endMs - T0) / 2);
    expect(first.params.mode).toBe('rush');
    expect(first.params.curve).toEqual({ atMs: [T0, mid, day.endMs], micros: [100_000_000, 1e9, 1e9] });
    const text = encodeState(first.state);
    expect(text.startsWith('1r,')).toBe(true);
    const decoded = decodeState(text);
    expect(decoded).toEqual(first.state);
    // Paced: it holds pressure (the even curve's control law), unlike ASAP.
    const continued = next(decoded as typeof first.state);
    const uninterrupted = next(first.state);
    expect(continued.params).toEqual(uninterrupted.params);
    expect(encodeState(continued.state)).toBe(encodeState(uninterrupted.state));
    expect(uninterrupted.state.integral).not.toBe(0);
  });

  it('is accepted by the codec: publishable, and decoded back by a reader', () => {
    register(RUSH);
    const { first, day } = twoSteps(MODE);
    expect(() => assertPublishable(first.params)).not.toThrow();
    const decoded = decodeCampaignHash(hashOf(first.params, day))?.plans.get('campaign');
    expect(decoded).toMatchObject({ mode: 'rush', curve: first.params.curve, dayWindow: day });
    const safe = failSafeParams(plan(MODE), day);
    expect(safe.curve).toEqual(linearDayCurve(day, 1e9));
    expect(() => assertPublishable(safe)).not.toThrow();
  });

  it('is accepted by the simulator: scenario files and every strategy', () => {
    register(RUSH);
    const s = parseScenario(scenario('rush'));
    expect(s.accounts[0]?.pacingMode).toBe('rush');
    expect(s.campaigns.map((c) => c.pacingMode)).toEqual(['rush', 'even']);
    expect(s.campaigns[1]?.arms[0]?.pacingMode).toBe('rush');
    const day = dayWindow(T0, TZ);
    const curves = Object.fromEntries(
      STRATEGIES.map((name) => {
        const r = controllerOf(name).step(
          { plan: plan(MODE), day, nowMs: T0, spend: spend(0) },
          undefined,
          undefined,
        );
        expect(() => assertPublishable(r.params), name).not.toThrow();
        return [name, r.params.curve];
      }),
    );
    expect(curves.paceline?.atMs).toHaveLength(3);
    // The baselines: the mode's fail-safe curve (linear), slots for a paced mode.
    expect(curves.linear).toEqual(linearDayCurve(day, 1e9));
    expect(curves.asap).toEqual(linearDayCurve(day, 1e9));
    expect(curves.slots).toEqual(slotsCurve(TZ, day, 1e9));
  });

  it('is refused everywhere, naming it, once it is not registered', () => {
    const remove = registerPacingMode(RUSH);
    const { first, day } = twoSteps(MODE);
    const state = encodeState(first.state);
    const hash = hashOf(first.params, day);
    remove();
    expect(findPacingMode('rush')).toBeUndefined();
    expect(() => validatePlan(plan(MODE))).toThrow(
      'pacingMode: "rush" is not a pacing mode: use even, asap, ahead, asap-hourly, front-loaded, curve',
    );
    expect(() =>
      planFromFlags({ level: 'account', account: 'a', 'daily-budget': '1', pacing: 'rush' }),
    ).toThrow(CliUsageError);
    expect(() => parseScenario(scenario('rush'))).toThrow(ScenarioError);
    expect(() => parseScenario(scenario('rush'))).toThrow(/must be a pacing mode: even, asap/);
    expect(() => decodeCampaignHash(hash)).toThrow(PacingDecodeError);
    expect(() => decodeCampaignHash(hash)).toThrow(/pacing mode "rush" is not known to this version/);
    expect(() => assertPublishable(first.params)).toThrow(/mode rush is not a pacing mode/);
    // The controller: an error for the plan's mode and for the stored state's code.
    expect(() => twoSteps(MODE)).toThrow(UnknownPacingModeError);
    const error = (() => {
      try {
        decodeState(state);
      } catch (e) {
        return e;
      }
    })() as UnknownPacingModeError;
    expect(error).toBeInstanceOf(UnknownPacingModeError);
    expect(error).toBeInstanceOf(PacelineError);
    expect(error.code).toBe('pacing.unknown-mode');
    expect(error.mode).toBe('1r');
    expect(error.message).toMatch(
      /pacing mode code "r", which this version does not know \(known: e even, a asap, h ahead, s asap-hourly, f front-loaded, c curve\)/,
    );
    expect(() => encodeState(first.state)).toThrow(UnknownPacingModeError);
  });
});

describe('the registry', () => {
  it('holds the built-in modes, each with its own state code', () => {
    expect(pacingModeIds()).toEqual(['even', 'asap', 'ahead', 'asap-hourly', 'front-loaded', 'curve']);
    expect(pacingModeOf('even')).toMatchObject({ stateCode: 'e', paced: true, shaped: true });
    expect(pacingModeOf('asap')).toMatchObject({ stateCode: 'a', paced: false, shaped: false });
    expect(pacingModeOf('ahead')).toMatchObject({ stateCode: 'h', paced: true, shaped: true, hourly: false });
    expect(pacingModeOf('asap-hourly')).toMatchObject({
      stateCode: 's',
      paced: false,
      shaped: false,
      hourly: true,
    });
    expect(pacingModeOf('front-loaded')).toMatchObject({ stateCode: 'f', paced: true, shaped: true });
    expect(pacingModeOf('front-loaded').flightSchedule).toBeTypeOf('function');
  });

  it("every mode's guard default is its fail-safe curve, and that curve is publishable", () => {
    register(RUSH);
    // A 25-hour day (fall back in Los Angeles) and an ordinary one.
    for (const at of [Date.parse('2026-11-01T12:00:00-08:00'), T0]) {
      const day = dayWindow(at, TZ);
      for (const id of pacingModeIds()) {
        const mode = pacingModeOf(id);
        const curve = mode.failSafeCurve(day, 777_000_001);
        expect(() =>
          assertPublishable({
            planId: 'campaign',
            day: day.day,
            budgetMicros: 777_000_001,
            mode: id as PacingMode,
            throttle: 1,
            bidMultiplier: 1,
            curve,
          }),
        ).not.toThrow();
        for (let t = day.startMs; t <= day.endMs; t += 1_234_567) {
          expect(mode.defaultExpectedMicros(777_000_001, day, t), `${id} at ${t}`).toBe(
            evaluateCurve(curve, t),
          );
          expect(defaultCurve.expectedMicros(plan(id as PacingMode, 777_000_001), day, t)).toBe(
            evaluateCurve(curve, t),
          );
        }
      }
    }
  });

  it('gives a mode it does not know the linear day curve where only a safe ceiling is needed', () => {
    const day = dayWindow(T0, TZ);
    expect(safeCurvesOf('fast').failSafeCurve(day, 100)).toEqual(linearDayCurve(day, 100));
    expect(
      defaultCurve.expectedMicros(
        plan('fast' as PacingMode, 1000),
        day,
        day.startMs + (day.endMs - day.startMs) / 2,
      ),
    ).toBe(500);
    expect(failSafeParams(plan('fast' as PacingMode), day).curve).toEqual(linearDayCurve(day, 1e9));
    expect(() => pacingModeOf('fast')).toThrow(
      'pacing mode "fast" is not known to this version (known: even, asap, ahead, asap-hourly, front-loaded, curve): deploy a version that knows it',
    );
  });

  it('refuses ids and state codes that break the encodings or are taken', () => {
    const bad = (patch: Partial<PacingModeSpec>, message: RegExp) =>
      expect(() => registerPacingMode({ ...RUSH, ...patch })).toThrow(message);
    bad({ id: 'ru,sh' }, /the id must be 1–32 lower-case letters/);
    bad({ id: 'Front' }, /the id must be/);
    bad({ id: 'even' }, /a mode of this id exists/);
    bad({ stateCode: 'a' }, /state code "a" is mode asap's/);
    bad({ stateCode: 'F' }, /one lower-case letter/);
    bad({ stateCode: 'ff' }, /one lower-case letter/);
    bad({ help: 'two\nlines' }, /one line/);
    expect(() => registerPacingMode({ ...RUSH, id: 'x', stateCode: 'e' })).toThrow(PacingModeDefinitionError);
    expect(pacingModeIds()).toEqual(['even', 'asap', 'ahead', 'asap-hourly', 'front-loaded', 'curve']);
  });
});
