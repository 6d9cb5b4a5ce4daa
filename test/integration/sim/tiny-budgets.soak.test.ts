/** Issue 10's pacing-quality bounds on sim/scenarios/tiny-budgets.json (see quality.ts). */
import { describe } from 'vitest';
import { qualityBounds } from './quality.js';

describe('simulator: tiny-budgets', () => qualityBounds('tiny-budgets'));
