/**
 * The pacing-quality bounds on sim/scenarios/traffic-spike.json (see quality.ts). The tightest
 * scenario: the $1 campaign is 4.57 % behind its curve at the end of the 30-minute outage (3.1 % the
 * outage itself; the guards prefetch below F/2 to keep the rest small, docs/pacing-quality.md "Results").
 */
import { describe } from 'vitest';
import { qualityBounds } from './quality.js';

describe('simulator: traffic-spike', () => qualityBounds('traffic-spike'));
