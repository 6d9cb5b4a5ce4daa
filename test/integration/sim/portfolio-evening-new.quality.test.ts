/**
 * The pacing-quality bounds on sim/scenarios/portfolio-evening-new.json (see quality.ts). A night-
 * heavy market where 40 % of the campaigns are created at 17:00 local on the scored day: their
 * first curve follows the prior learned from the others.
 */
import { describe } from 'vitest';
import { qualityBounds } from './quality.js';

describe('simulator: portfolio-evening-new', () => qualityBounds('portfolio-evening-new'));
