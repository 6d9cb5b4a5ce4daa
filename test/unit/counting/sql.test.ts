import { describe, expect, it } from 'vitest';
import { CountQuerySyntaxError, parseCountQuery } from '../../../shared/counting/sql.js';
import { DAY_MS, HOUR_MS } from '../../../shared/time/clock.js';

const now = Date.UTC(2026, 10, 21, 12);

describe('SQL-like count queries', () => {
  it('parses the issue example', () => {
    expect(
      parseCountQuery(
        "SELECT COUNT(*) FROM actions WHERE user = 42 AND action = 'click' AND time > now() - 7d GROUP BY campaign",
        now,
      ),
    ).toEqual({
      userId: '42',
      query: {
        ranges: [{ from: now - 7 * DAY_MS + 1, to: Number.MAX_SAFE_INTEGER }],
        filter: { action: ['click'] },
        groupBy: ['campaign'],
      },
    });
  });

  it('supports IN lists, several filters, bounded ranges and case-insensitive keywords', () => {
    const { query } = parseCountQuery(
      "select count(*) from actions where campaign in (3, 4) and user = '18446744073709551615' and viewType = home " +
        "and time >= '2026-11-20T00:00:00Z' and time < now() - 1h group by ad, viewType",
      now,
    );
    expect(query).toEqual({
      ranges: [{ from: Date.UTC(2026, 10, 20), to: now - HOUR_MS }],
      filter: { campaign: [3, 4], viewType: ['home'] },
      groupBy: ['ad', 'viewType'],
    });
    expect(
      parseCountQuery('SELECT COUNT(*) FROM actions WHERE user = 1 AND time BETWEEN 100 AND 200', now).query,
    ).toEqual({ ranges: [{ from: 100, to: 200 }] });
  });

  it('reports what was expected and where', () => {
    const error = (text: string) => {
      try {
        parseCountQuery(text, now);
      } catch (e) {
        return e as CountQuerySyntaxError;
      }
      throw new Error('expected a syntax error');
    };
    expect(error('SELECT COUNT(*) FROM users WHERE user = 1').message).toMatch(
      /Expected ACTIONS at position 21, found "users"/,
    );
    expect(error('SELECT COUNT(*) FROM actions WHERE color = 1').message).toMatch(
      /Expected a dimension \(insertionId, action/,
    );
    expect(error("SELECT COUNT(*) FROM actions WHERE action = 'click'").message).toMatch(
      /must name the user/,
    );
    expect(error('SELECT COUNT(*) FROM actions WHERE user = 1 AND time > now() - 7w').message).toMatch(
      /duration/,
    );
    expect(error('SELECT COUNT(*) FROM actions WHERE user = 1 AND time > 10 AND time < 5').message).toMatch(
      /empty range/,
    );
    expect(error('SELECT COUNT(*) FROM actions WHERE user = 1 ORDER BY ad')).toBeInstanceOf(
      CountQuerySyntaxError,
    );
  });
});
