/**
 * The pacing-quality bounds on sim/scenarios/portfolio-no-loss-notices.json (see quality.ts). An
 * exchange without loss notices (`lossNoticeRate: 0`) and win notices after 45 s on average:
 * in-flight that no notice resolves is released up to the cap (docs/spend.md), and no plan
 * overspends by more than 0.5 %.
 */
import { describe } from 'vitest';
import { qualityBounds } from './quality.js';

describe('simulator: portfolio-no-loss-notices', () => qualityBounds('portfolio-no-loss-notices'));
