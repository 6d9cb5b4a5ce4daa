/**
 * Advertiser days begin at local midnight, DST included: a spring-forward day is 23 h, a
 * fall-back day 25 h, in both hemispheres (Auckland switches in September / April, Los Angeles in
 * March / November).
 */
import { describe, expect, it } from 'vitest';
import {
  assertTimeZone,
  dayWindow,
  dayWindowOf,
  InvalidTimeZoneError,
  isTimeZone,
  localDate,
} from '../../../shared/budget/time-zone.js';

const H = 3_600_000;

describe('dayWindow', () => {
  it.each([
    // zone, local date, UTC instant of its local midnight, length in hours
    ['America/Los_Angeles', '2026-11-21', '2026-11-21T08:00:00Z', 24],
    ['America/Los_Angeles', '2026-03-08', '2026-03-08T08:00:00Z', 23], // spring forward
    ['America/Los_Angeles', '2026-11-01', '2026-11-01T07:00:00Z', 25], // fall back
    ['Pacific/Auckland', '2026-09-27', '2026-09-26T12:00:00Z', 23], // NZ spring forward
    ['Pacific/Auckland', '2026-04-05', '2026-04-04T11:00:00Z', 25], // NZ fall back
    ['Pacific/Auckland', '2026-11-21', '2026-11-20T11:00:00Z', 24],
    ['UTC', '2026-11-21', '2026-11-21T00:00:00Z', 24],
    ['Asia/Kolkata', '2026-11-21', '2026-11-20T18:30:00Z', 24],
  ])('%s %s starts at %s and lasts %i h', (zone, day, start, hours) => {
    const w = dayWindowOf(day, zone);
    expect(w.day).toBe(day);
    expect(new Date(w.startMs).toISOString()).toBe(new Date(start).toISOString());
    expect(w.endMs - w.startMs).toBe(hours * H);
    // Every instant of the window maps back to it; the instants around it do not.
    expect(dayWindow(w.startMs, zone)).toEqual(w);
    expect(dayWindow(w.endMs - 1, zone)).toEqual(w);
    expect(dayWindow(w.startMs + (hours * H) / 2, zone)).toEqual(w);
    expect(dayWindow(w.startMs - 1, zone).day).not.toBe(day);
    expect(dayWindow(w.endMs, zone).startMs).toBe(w.endMs);
  });

  it('rolls Auckland and Los Angeles at their own midnights', () => {
    // 2026-11-21T11:00Z is midnight in Auckland (NZDT, +13) and 03:00 the day before in LA.
    const t = Date.parse('2026-11-21T11:00:00Z');
    expect(localDate(t - 1, 'Pacific/Auckland')).toBe('2026-11-21');
    expect(localDate(t, 'Pacific/Auckland')).toBe('2026-11-22');
    expect(localDate(t - 1, 'America/Los_Angeles')).toBe('2026-11-21');
    expect(localDate(t, 'America/Los_Angeles')).toBe('2026-11-21');
  });

  it('handles a zone whose DST switch skips midnight (America/Santiago, 2026-09-06)', () => {
    const w = dayWindowOf('2026-09-06', 'America/Santiago');
    expect(w.endMs - w.startMs).toBe(23 * H);
    expect(localDate(w.startMs, 'America/Santiago')).toBe('2026-09-06');
    expect(localDate(w.startMs - 1, 'America/Santiago')).toBe('2026-09-05');
  });

  it('rejects unknown zones with a clear error', () => {
    expect(() => assertTimeZone('Mars/Olympus')).toThrow(InvalidTimeZoneError);
    expect(() => assertTimeZone('Mars/Olympus')).toThrow(/IANA name/);
    expect(isTimeZone('Mars/Olympus')).toBe(false);
    expect(isTimeZone('America/New_York')).toBe(true);
    expect(isTimeZone('US/Pacific')).toBe(true);
  });
});

describe('canonical zones and calendar days', () => {
  it('stores one spelling per zone and refuses offsets', async () => {
    const { canonicalTimeZone, InvalidTimeZoneError } = await import('../../../shared/budget/time-zone.js');
    expect(canonicalTimeZone('america/los_angeles')).toBe('America/Los_Angeles');
    expect(canonicalTimeZone('US/Pacific')).toBe('America/Los_Angeles');
    expect(canonicalTimeZone('Etc/UTC')).toBe('UTC');
    for (const z of ['+01:00', 'UTC+1', '', 'Mars/Base'])
      expect(() => canonicalTimeZone(z)).toThrow(InvalidTimeZoneError);
  });

  it('accepts only real calendar days', async () => {
    const { parseDay, dayWindowOf, InvalidDayError } = await import('../../../shared/budget/time-zone.js');
    expect(parseDay('2028-02-29')).toEqual({ y: 2028, m: 2, d: 29 });
    for (const d of ['2026-13-45', '2026-02-29', '2026-04-31', '2026-1-5', '26-01-05', '1969-12-31']) {
      expect(() => parseDay(d)).toThrow(InvalidDayError);
    }
    expect(() => dayWindowOf('2026-13-45', 'UTC')).toThrow(InvalidDayError);
  });
});
