/**
 * One budget across two regions (sim/scenarios/regions-flip.json; see regions-quality.ts): 90/10
 * of the traffic flipping to 10/90 at noon, $1–$1,000 budgets fillable and not. Beyond the
 * acceptance: the region with most of the traffic spends most of the budget in each half of the
 * day, and only the home (the first region) grants.
 */
import { describe, expect } from 'vitest';
import { regionQuality } from './regions-quality.js';

describe('simulator: regions-flip', () =>
  regionQuality('regions-flip', (json) => {
    const regions = json.strategies.paceline?.regions ?? {};
    const east = regions['us-east-1'];
    const west = regions['us-west-2'];
    expect(east?.grantedMicros).toBeGreaterThan(0);
    expect(west?.grantedMicros).toBe(0);
    // The same number of requests over the day (0.9 × ½ + 0.1 × ½ each), so each spends a part.
    expect(east?.spendShare).toBeGreaterThan(0.2);
    expect(west?.spendShare).toBeGreaterThan(0.2);
    expect(east?.lostMinutes).toBe(0);
  }));
