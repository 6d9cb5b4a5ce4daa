/** The pacing-quality bounds on sim/scenarios/evening-peak-day.json (see quality.ts). */
import { describe } from 'vitest';
import { qualityBounds } from './quality.js';

describe('simulator: evening-peak-day', () => qualityBounds('evening-peak-day'));
