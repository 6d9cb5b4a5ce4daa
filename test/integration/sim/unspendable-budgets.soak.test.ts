/** Issue 10's pacing-quality bounds on sim/scenarios/unspendable-budgets.json (see quality.ts). */
import { describe } from 'vitest';
import { qualityBounds } from './quality.js';

describe('simulator: unspendable-budgets', () => qualityBounds('unspendable-budgets'));
