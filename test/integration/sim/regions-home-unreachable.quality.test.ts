/**
 * One budget across two regions, the home region unreachable for an hour
 * (sim/scenarios/regions-home-unreachable.json; see regions-quality.ts). The other region stops
 * at its allocation lease (2 minutes after the last ack it saw) and bids again once the home is
 * reachable: no overspend, an hour of its traffic not spent. The stated utilisation bound for
 * this fault is 95 % of every fillable campaign (docs/pacing.md, "Many regions"); the day's
 * other 23 hours catch up most of it. Beyond the acceptance: the region follows an authority that
 * is ~an hour old at most (what the AllocationAuthorityAge alarm watches), and its allocation
 * refused bids while it was cut off.
 */
import { describe, expect } from 'vitest';
import { REGION_ACCEPTANCE, regionQuality } from './regions-quality.js';

describe('simulator: regions-home-unreachable', () =>
  regionQuality(
    'regions-home-unreachable',
    (json) => {
      const west = json.strategies.paceline?.regions?.['us-west-2'];
      expect(west?.authorityAgeMaxSeconds).toBeGreaterThanOrEqual(55 * 60);
      expect(west?.authorityAgeMaxSeconds).toBeLessThanOrEqual(62 * 60);
      expect(west?.allocationRefusals).toBeGreaterThan(0);
    },
    { ...REGION_ACCEPTANCE, utilisationMin: 0.95 },
  ));
