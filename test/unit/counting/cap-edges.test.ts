/**
 * The frequency-cap edge table (docs/counting.md), pure tier: the rows whose outcome does not
 * depend on ingest dedup, evaluated by evaluateCaps over the rows' events. Every row, dedup
 * included, also runs end to end on redis-server: test/integration/counting/cap-edges.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { decodeRecord } from '../../../shared/counting/event-decode.js';
import { evaluateCaps, InvalidCountQueryError } from '../../../shared/counting/query.js';
import { DAY_MS } from '../../../shared/time/clock.js';
import { CAP_EDGE_ROWS, EDGE_NOW, edgeCandidate, edgeRecord } from '../../support/cap-edges.js';

describe('frequency-cap edge table (pure rows)', () => {
  it('has rows of both kinds', () => {
    expect(CAP_EDGE_ROWS.filter((r) => !r.dedup).length).toBeGreaterThanOrEqual(8);
    expect(CAP_EDGE_ROWS.filter((r) => r.dedup).length).toBeGreaterThanOrEqual(8);
  });

  it.each(CAP_EDGE_ROWS.filter((r) => !r.dedup).map((r) => [r.name, r] as const))('%s', (_name, row) => {
    const members = row.events.map((e) => decodeRecord(edgeRecord('42', e)).member);
    const check = () => evaluateCaps(members, [edgeCandidate(row)], EDGE_NOW, EDGE_NOW - 30 * DAY_MS);
    if ('error' in row.expect) {
      expect(check).toThrow(InvalidCountQueryError);
      expect(check).toThrow(row.expect.error);
      return;
    }
    const result = check();
    const verdict = [...result.allowed, ...result.rejected][0];
    expect(verdict?.allowed).toBe(row.expect.allowed);
    expect(verdict?.strictest?.count).toBe(row.expect.count);
    expect(verdict?.hits.length).toBe(row.expect.allowed ? 0 : 1);
  });

  it('a block is the strictest cap of a candidate even when another cap is hit harder', () => {
    const members = Array.from(
      { length: 5 },
      (_, i) => decodeRecord(edgeRecord('42', { at: -1000, insertion: i + 1 })).member,
    );
    const result = evaluateCaps(
      members,
      [
        {
          id: 'c',
          entities: { ad: 11, advertiser: 1 },
          caps: [
            { level: 'ad', windowMs: DAY_MS, max: 2 },
            { level: 'advertiser', block: true },
          ],
        },
      ],
      EDGE_NOW,
      0,
    );
    const [verdict] = result.rejected;
    expect(verdict?.strictest).toMatchObject({
      cap: { level: 'advertiser', block: true },
      count: 0,
      remaining: 0,
    });
    expect(verdict?.hits.map((h) => [h.cap.level, h.count, h.remaining])).toEqual([
      ['ad', 5, -3],
      ['advertiser', 0, 0],
    ]);
  });

  it('rejects malformed caps and blocks, naming them', () => {
    const run =
      (caps: unknown[], entities: Record<string, unknown> = { ad: 11 }) =>
      () =>
        evaluateCaps([], [{ id: 'x', entities, caps } as never], EDGE_NOW, 0);
    expect(run([{ level: 'ad', windowMs: 0, max: 1 }])).toThrow(
      /candidate x cap 0 \{"level":"ad","windowMs":0,"max":1\}: windowMs must be a positive integer/,
    );
    expect(run([{ level: 'ad', windowMs: 1000, max: 1.5 }])).toThrow(/max must be an integer ≥ 1/);
    expect(run([{ level: 'ad', windowMs: 1000, max: -1 }])).toThrow(/max must be an integer ≥ 1/);
    expect(run([{ level: 'ad', block: true, max: 0 }])).toThrow(
      /a block is exactly \{ level, block: true \}/,
    );
    expect(run([{ level: 'ad', block: false, windowMs: 1, max: 1 }])).toThrow(/a block is exactly/);
    expect(run([{ level: 'campaign', block: true }])).toThrow(/the candidate has no "campaign" id/);
    expect(run([{ level: 'action', block: true }])).toThrow(/level "action" is not an entity id dimension/);
  });
});
