/**
 * Issue 10's pacing-quality bounds on sim/scenarios/traffic-spike.json (see quality.ts). Fails as of
 * 2026-11-25, on purpose not loosened: the $1 campaign is 5.21 % behind its curve at the end of the
 * 30-minute outage (3.1 % the outage, 2.1 % the guards' floats and the margin; docs/pacing-quality.md
 * "Results" says what would fix it).
 */
import { describe } from 'vitest';
import { qualityBounds } from './quality.js';

describe('simulator: traffic-spike', () => qualityBounds('traffic-spike'));
