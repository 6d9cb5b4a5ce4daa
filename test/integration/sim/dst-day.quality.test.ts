/** The pacing-quality bounds on sim/scenarios/dst-day.json (see quality.ts). */
import { describe } from 'vitest';
import { qualityBounds } from './quality.js';

describe('simulator: dst-day', () => qualityBounds('dst-day'));
