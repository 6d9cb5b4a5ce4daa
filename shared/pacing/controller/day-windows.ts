/**
 * A dayparted plan in the controller (docs/spend.md, "Dayparting"): the day's traffic profile is
 * restricted to the plan's windows (each slot's weight × the share of it that is open), so E(t)
 * spreads the budget over the open hours by their traffic; the curve is then made flat wherever
 * the windows are closed (../curve-windows.ts). The windows' fingerprint goes into the profile's,
 * so a window change mid-day no longer matches the state's shape and the step re-anchors the
 * rest of the day through E's last value.
 */
import { type DayWindows, openTimeBetween } from '../../budget/daypart.js';
import type { DaySlots } from './day-slots.js';
import type { DayProfile } from './forecast.js';

const masked = new WeakMap<DayProfile, { hash: number; profile: DayProfile }>();

/** `profile` restricted to the windows `w` (the profile itself when there are none). */
export function windowedProfile(profile: DayProfile, w: DayWindows | undefined): DayProfile;
export function windowedProfile(
  profile: DayProfile | undefined,
  w: DayWindows | undefined,
): DayProfile | undefined;
export function windowedProfile(
  profile: DayProfile | undefined,
  w: DayWindows | undefined,
): DayProfile | undefined {
  if (!profile || !w) return profile;
  const hit = masked.get(profile);
  if (hit && hit.hash === w.hash) return hit.profile;
  const open = openShares(profile.slots, w);
  const out: DayProfile = {
    slots: profile.slots,
    weights: profile.weights.map((x, k) => x * (open[k] as number)),
    demand: profile.demand?.map((x, k) => x * (open[k] as number)),
    // 24 bits, as the profile's own (the state stores it).
    hash: (Math.imul(profile.hash ^ w.hash, 0x01000193) >>> 8) & 0xffffff,
  };
  masked.set(profile, { hash: w.hash, profile: out });
  return out;
}

/** The share of each slot inside the windows, in [0, 1]. */
function openShares(slots: DaySlots, w: DayWindows): number[] {
  const out: number[] = [];
  for (let k = 0; k < slots.hours.length; k++) {
    const a = slots.knots[k] as number;
    const b = slots.knots[k + 1] as number;
    out.push(b > a ? openTimeBetween(w, a, b) / (b - a) : 0);
  }
  return out;
}
