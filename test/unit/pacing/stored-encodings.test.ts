/**
 * States and forecasts stored by earlier code still load: the encodings captured at commit
 * ecb0a04 (test/fixtures/pacing/encodings-f1.json, written by capture-encodings.ts there) decode,
 * re-encode to the same text, and a leader that decodes them continues the plan-day on the same
 * curve (no re-anchor, no jump of E) — the takeover path of a rolling deploy.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { resolvePlan } from '../../../shared/budget/model.js';
import { dayWindow } from '../../../shared/budget/time-zone.js';
import { createPacingController } from '../../../shared/pacing/controller/index.js';
import { evaluateCurve } from '../../../shared/pacing/types.js';

interface Snapshot {
  name: string;
  timeZone: string;
  budgetMicros: number;
  mode: 'even' | 'asap';
  atMs: number;
  state: string;
  forecast: string | null;
  curve: { atMs: number[]; micros: number[] };
  confirmedMicros: number;
  inFlightMicros: number;
  expectedMicros: number;
}

const fixture = JSON.parse(
  readFileSync(new URL('../../fixtures/pacing/encodings-f1.json', import.meta.url), 'utf8'),
) as { snapshots: Snapshot[] };
const ctl = createPacingController();

describe('stored encodings of earlier code (f1 forecasts, format-1 states)', () => {
  it('has the captured situations', () => {
    expect(fixture.snapshots.map((s) => s.name)).toEqual([
      'fresh-first-day',
      'learned-day-4',
      'after-midnight',
      'asap',
      'ten-million',
      'dst-25h',
    ]);
  });

  for (const s of fixture.snapshots) {
    it(`${s.name}: decodes, re-encodes to the same text, and continues on the same curve`, () => {
      const state = ctl.decodeState(s.state);
      expect(state, 'state decodes').toBeDefined();
      if (!state) return;
      expect(ctl.encodeState(state)).toBe(s.state);
      const forecast = s.forecast === null ? undefined : ctl.decodeForecast(s.forecast);
      if (s.forecast !== null) {
        expect(forecast, 'forecast decodes').toBeDefined();
        expect(ctl.encodeForecast(forecast as NonNullable<typeof forecast>)).toBe(s.forecast);
      }
      const plan = resolvePlan(
        {
          level: 'campaign',
          accountId: 'a',
          campaignId: 'c',
          dailyBudgetMicros: s.budgetMicros,
          pacingMode: s.mode,
        },
        s.timeZone,
      );
      const now = s.atMs + 10_000;
      const r = ctl.step(
        {
          plan,
          day: dayWindow(now, s.timeZone),
          nowMs: now,
          spend: {
            initialised: true,
            confirmedMicros: s.confirmedMicros,
            inFlightMicros: s.inFlightMicros,
            leasedMicros: 0,
          },
        },
        state,
        forecast,
      );
      // The same anchor and the same curve: the stored state's shape fingerprint matches the
      // profile the new code computes from the stored forecast.
      expect(r.state.anchorSec).toBe(state.anchorSec);
      expect({ atMs: [...r.params.curve.atMs], micros: [...r.params.curve.micros] }).toEqual(s.curve);
      expect(evaluateCurve(r.params.curve, s.atMs)).toBe(s.expectedMicros);
    });
  }
});
