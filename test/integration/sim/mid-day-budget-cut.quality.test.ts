/** The pacing-quality bounds on sim/scenarios/mid-day-budget-cut.json (see quality.ts). */
import { describe } from 'vitest';
import { qualityBounds } from './quality.js';

describe('simulator: mid-day-budget-cut', () => qualityBounds('mid-day-budget-cut'));
