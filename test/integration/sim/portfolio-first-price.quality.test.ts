/**
 * The pacing-quality bounds on sim/scenarios/portfolio-first-price.json (see quality.ts). A
 * generated first-price portfolio of 100 campaigns (budgets exp(Gamma(3.77)) dollars) in four
 * zones, one history day: the bounds, and a cost per impression at least 35 % below ASAP's
 * (shading is the only saving in first price).
 */
import { describe } from 'vitest';
import { ACCEPTANCE, qualityBounds } from './quality.js';

describe('simulator: portfolio-first-price', () =>
  qualityBounds('portfolio-first-price', undefined, { ...ACCEPTANCE, costVsAsapMax: 0.65 }));
