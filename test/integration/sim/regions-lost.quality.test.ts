/**
 * One budget across three regions with 5 s replication lag, one region lost for 30 minutes
 * (sim/scenarios/regions-lost.json; see regions-quality.ts). Beyond the acceptance: the lost
 * region is down 30 minutes, the home reclaims what it held only once it provably spends nothing
 * (its lease + skew + lease-ahead + T + the replication margin after its last ack: ~27 min), and
 * the region follows the authority again once back.
 */
import { describe, expect } from 'vitest';
import { regionQuality } from './regions-quality.js';

describe('simulator: regions-lost', () =>
  regionQuality('regions-lost', (json, runs) => {
    const p = json.strategies.paceline;
    const lost = p?.regions?.['us-west-2'];
    expect(lost?.lostMinutes).toBe(30);
    const run = runs.find((r) => r.strategy === 'paceline');
    expect(run?.faults.some((f) => f.endsWith('region-lost us-west-2'))).toBe(true);
    expect(run?.faults.some((f) => f.endsWith('region-back us-west-2'))).toBe(true);
    // The other regions kept following a fresh authority (a tick or a lag old at most).
    expect(p?.regions?.['eu-west-1']?.authorityAgeMaxSeconds).toBeLessThanOrEqual(30);
  }));
