/**
 * A pacing mode that ships with no version of Paceline, for the tests of the mode registry
 * (docs/pacing.md, "Adding a pacing mode"): registered by a test, it is a mode the running code
 * knows; removed again, a stored state of it is a mode this version does not know.
 */
import { flatCurve, linearDayCurve, linearExpected } from '../../shared/pacing/controller/curve.js';
import type { PacingModeSpec } from '../../shared/pacing/modes.js';

/** A mode that rushes: the remainder spent over the first half of what is left of the day. */
export const RUSH: PacingModeSpec = {
  id: 'rush',
  stateCode: 'r',
  help: 'the remainder over the first half of the day left (a test mode)',
  paced: true,
  shaped: false,
  hourly: false,
  curve: ({ slots, fromMs, anchorMicros, budgetMicros }) => {
    if (anchorMicros >= budgetMicros || slots.endMs - fromMs < 2)
      return flatCurve(fromMs, slots.endMs, budgetMicros);
    const mid = fromMs + Math.floor((slots.endMs - fromMs) / 2);
    return { atMs: [fromMs, mid, slots.endMs], micros: [anchorMicros, budgetMicros, budgetMicros] };
  },
  failSafeCurve: linearDayCurve,
  defaultExpectedMicros: linearExpected,
};
