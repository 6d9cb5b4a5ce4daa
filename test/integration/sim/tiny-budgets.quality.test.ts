/**
 * The pacing-quality bounds on sim/scenarios/tiny-budgets.json (see quality.ts): $1–$2
 * campaigns, a few thousand impressions a day, each looked up about once a minute per ad server at
 * night (the reader's idle window and the guard curve's `prepare` keep them on the published curve).
 */
import { describe } from 'vitest';
import { qualityBounds } from './quality.js';

describe('simulator: tiny-budgets', () => qualityBounds('tiny-budgets'));
