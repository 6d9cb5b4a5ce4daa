/** The pacing-quality bounds on sim/scenarios/normal-day.json (see quality.ts). */
import { describe } from 'vitest';
import { qualityBounds } from './quality.js';

describe('simulator: normal-day', () => qualityBounds('normal-day'));
