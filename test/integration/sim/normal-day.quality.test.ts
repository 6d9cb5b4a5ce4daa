/**
 * The pacing-quality bounds on sim/scenarios/normal-day.json (see quality.ts), and the delivery
 * alarms on its day (shared/pacing/alarms.ts, evaluated as CloudWatch does by `alarmFires` on the
 * bands the publishing pacer counted each minute): the campaign the market cannot fill keeps
 * `DeliveryBehind` raised with the reason `lost-auctions` or `no-traffic`, and nothing raises
 * `DeliveryAhead`.
 */
import { describe, expect } from 'vitest';
import { dayWindowOf } from '../../../shared/budget/time-zone.js';
import { alarmFires, pacerAlarmSpecs } from '../../../shared/pacing/alarms.js';
import { behindTotal } from '../../../shared/pacing/delivery-counts.js';
import { defaultPacerSettings } from '../../../shared/region/resources.js';
import { qualityBounds } from './quality.js';

const SCORED = dayWindowOf('2026-03-04', 'America/New_York');
const spec = (id: string) => {
  const s = pacerAlarmSpecs(defaultPacerSettings).find((a) => a.id === id);
  if (!s) throw new Error(`no alarm ${id}`);
  return s;
};

describe('simulator: normal-day', () =>
  qualityBounds('normal-day', (_json, runs) => {
    const minutes = (runs.find((r) => r.strategy === 'paceline')?.deliveryMinutes ?? []).filter(
      (m) => m.atMs >= SCORED.startMs && m.atMs < SCORED.endMs,
    );
    expect(minutes.length).toBeGreaterThan(1_400);
    expect(
      alarmFires(
        spec('DeliveryBehind'),
        minutes.map((m) => behindTotal(m.counts)),
      ),
    ).toBe(true);
    // The unfillable campaign is behind at full speed: it bids and does not win enough.
    const marketReasons = minutes.filter(
      (m) => m.counts.behind['lost-auctions'] + m.counts.behind['no-traffic'] > 0,
    ).length;
    expect(marketReasons).toBeGreaterThan(minutes.length / 2);
    expect(
      alarmFires(
        spec('DeliveryAhead'),
        minutes.map((m) => m.counts.ahead),
      ),
    ).toBe(false);
  }));
