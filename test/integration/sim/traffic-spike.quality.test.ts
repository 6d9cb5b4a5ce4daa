/** Issue 10's pacing-quality bounds on sim/scenarios/traffic-spike.json (see quality.ts). */
import { describe } from 'vitest';
import { qualityBounds } from './quality.js';

describe('simulator: traffic-spike', () => qualityBounds('traffic-spike'));
