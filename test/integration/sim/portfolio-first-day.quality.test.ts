/**
 * The pacing-quality bounds on sim/scenarios/portfolio-first-day.json (see quality.ts). The same
 * portfolio on its first day (`historyDays: 0`): every plan starts without a forecast of its own,
 * from the built-in prior.
 */
import { describe } from 'vitest';
import { qualityBounds } from './quality.js';

describe('simulator: portfolio-first-day', () => qualityBounds('portfolio-first-day'));
