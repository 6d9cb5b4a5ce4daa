/**
 * The contract reader's count of what guards hold (`planDaySnapshot`, `liveHeld`): a negative
 * in-flight sum — bids a notice resolved before their guard settled them out of its lease — comes
 * off the leased float, where those bids are still counted, so a bid is never counted twice.
 */
import { describe, expect, it } from 'vitest';
import { liveHeld, planDaySnapshot } from '../../../shared/spend/live-counters.js';

const NOW = Date.UTC(2026, 2, 7, 6, 0, 40);
const Q = 1000;
const slot = (ms: number) => String(Math.floor(ms / Q));

describe('what guards hold of a plan-day', () => {
  it('takes a negative in-flight sum off the leased float', () => {
    // 184,143 leased; 61,984 of wins applied while 12,718 had been settled into flight.
    const snap = planDaySnapshot(
      {
        r: 'e1',
        q: String(Q),
        t: '30000',
        c: '61984',
        [`l:${slot(NOW + 5000)}`]: '184143',
        [`f:${slot(NOW - 4000)}`]: String(12_718 - 61_984),
      },
      NOW,
    );
    expect(snap.confirmedMicros).toBe(61_984);
    expect(snap.inFlightMicros).toBe(0);
    expect(snap.leasedMicros).toBe(184_143 + 12_718 - 61_984);
    expect(snap.confirmedMicros + snap.inFlightMicros + snap.leasedMicros).toBe(184_143 + 12_718);
  });

  it('keeps each sum as it is when in flight is not negative, and never goes below 0', () => {
    expect(liveHeld(500, 200)).toEqual({ leasedMicros: 500, inFlightMicros: 200 });
    expect(liveHeld(500, -200)).toEqual({ leasedMicros: 300, inFlightMicros: 0 });
    expect(liveHeld(100, -200)).toEqual({ leasedMicros: 0, inFlightMicros: 0 });
    // A negative leased sum (settle deltas of a lease a reset dropped) counts 0, as before.
    expect(liveHeld(-300, 200)).toEqual({ leasedMicros: 0, inFlightMicros: 200 });
    expect(liveHeld(-300, -200)).toEqual({ leasedMicros: 0, inFlightMicros: 0 });
  });

  it('ignores dead slots', () => {
    const snap = planDaySnapshot(
      {
        r: 'e1',
        q: String(Q),
        t: '30000',
        c: '0',
        [`l:${slot(NOW)}`]: '500',
        [`f:${slot(NOW - 60_000)}`]: '-400',
      },
      NOW,
    );
    expect(snap.leasedMicros).toBe(500);
  });
});
