/**
 * The pacing-quality bounds on sim/scenarios/unspendable-budgets.json (see quality.ts): the
 * two unfillable campaigns (ASAP does not fill them) are held to no overspend only; the $1 campaign
 * that shares its segment with a full-speed campaign of the same advertiser is held to every bound.
 */
import { describe } from 'vitest';
import { qualityBounds } from './quality.js';

describe('simulator: unspendable-budgets', () => qualityBounds('unspendable-budgets'));
