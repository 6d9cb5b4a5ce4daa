/**
 * Win and loss notices as exchanges send them: after a delay, sometimes never (a lost win notice
 * is spend the books never see), sometimes twice; loss notices only from some exchanges (the rest
 * of the lost bids stay in flight until they expire after T).
 */
import type { Random } from '../../shared/random/prng.js';

/** Notice behaviour of the exchange. */
export interface NoticeOptions {
  /** Mean notice delay (exponential), ms. @default 2_000 */
  readonly meanDelayMs?: number;
  /** Longest delay (the exchange's deadline), ms. @default 60_000 */
  readonly maxDelayMs?: number;
  /** Share of win notices never sent. @default 0 */
  readonly winNoticeLoss?: number;
  /** Share of notices sent twice (the duplicate a little later). @default 0 */
  readonly duplicateRate?: number;
  /** Share of lost bids that get a loss notice. @default 1 */
  readonly lossNoticeRate?: number;
}

/** One notice to deliver at `at`. */
export interface PlannedNotice {
  readonly at: number;
  readonly kind: 'win' | 'loss';
}

/** Notices for one bid made at `bidAt` that was won or lost. */
export function plannedNotices(
  won: boolean,
  bidAt: number,
  options: NoticeOptions,
  random: Random,
): PlannedNotice[] {
  const mean = options.meanDelayMs ?? 2_000;
  const max = options.maxDelayMs ?? 60_000;
  const delay = () => Math.min(max, Math.round(-mean * Math.log(Math.max(1e-12, random()))));
  if (won ? random() < (options.winNoticeLoss ?? 0) : random() >= (options.lossNoticeRate ?? 1)) return [];
  const kind = won ? 'win' : 'loss';
  const first = { at: bidAt + delay(), kind } as const;
  if (random() < (options.duplicateRate ?? 0)) return [first, { at: first.at + delay(), kind }];
  return [first];
}
