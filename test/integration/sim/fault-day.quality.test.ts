/**
 * The pacing-quality bounds on sim/scenarios/fault-day.json (see quality.ts), and the
 * faults themselves: the takeovers reloaded the stored state (leader killed, region flipped), the
 * old region's pacer was refused by the fence and none of its writes landed after the flip (the
 * shard's audit stream), and the live counters were rebuilt after Redis came back empty.
 */
import { describe, expect } from 'vitest';
import { qualityBounds } from './quality.js';

describe('simulator: fault-day', () =>
  qualityBounds('fault-day', (_json, runs) => {
    const paceline = runs.find((r) => r.strategy === 'paceline');
    if (!paceline) throw new Error('paceline did not run');
    expect(paceline.faults.map((f) => f.split(' ')[1])).toEqual([
      'leader-killed',
      'redis-restarted',
      'notices-stalled',
      'region-flipped',
    ]);
    // Leader killed, Redis restarted (the claim vanished: a whole rewrite), region flipped.
    expect(paceline.stateReloads).toBeGreaterThanOrEqual(3);
    expect(paceline.fencedWritesRejected).toBeGreaterThanOrEqual(1);
    expect(paceline.staleWritesAccepted).toBe(0);
  }));
