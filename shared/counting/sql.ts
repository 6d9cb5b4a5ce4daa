/**
 * A small SQL-like text form on top of the typed count API, for people (consoles, runbooks, ad
 * hoc checks), not for the serving path:
 *
 * ```sql
 * SELECT COUNT(*) FROM actions
 * WHERE user = 42 AND action = 'click' AND campaign IN (3, 4) AND time > now() - 7d
 * GROUP BY campaign, viewType
 * ```
 *
 * Conditions: `user = <id>` (required, once); `<dimension> = <value>` or `<dimension> IN (…)`;
 * `time` compared (`>`, `>=`, `<`, `<=`) with `now()`, `now() - <n><m|h|d>`, epoch ms or an ISO
 * date string, and `time BETWEEN a AND b` (= `time >= a AND time < b`: ranges are half-open).
 * Without a lower time bound the range starts at the retention horizon.
 */

import { PacelineError } from '../errors.js';
import { DAY_MS, HOUR_MS, MINUTE_MS } from '../time/clock.js';
import type { CountQuery, DimensionFilter } from './query.js';
import { actionEventSchema, type EventSchema } from './schema.js';

/** Thrown for text that is not a valid count query; the message shows where and what was expected. */
export class CountQuerySyntaxError extends PacelineError {
  override readonly name = 'CountQuerySyntaxError';
  override readonly code = 'counting.query-syntax';
  constructor(
    readonly position: number,
    message: string,
  ) {
    super(message);
  }
}

/** A parsed text query. */
export interface ParsedCountQuery {
  readonly userId: string;
  readonly query: CountQuery;
}

interface Token {
  readonly kind: 'word' | 'number' | 'string' | 'symbol' | 'duration' | 'end';
  readonly text: string;
  readonly at: number;
}

function tokenize(text: string): Token[] {
  const tokens: Token[] = [];
  const re = /\s*(?:(\d+[mhd]\b)|(\d+)|'((?:[^']|'')*)'|([A-Za-z_][A-Za-z0-9_]*)|(<=|>=|[(),*=<>-]))/y;
  let pos = 0;
  while (pos < text.length) {
    if (/^\s*$/.test(text.slice(pos))) break;
    re.lastIndex = pos;
    const m = re.exec(text);
    if (!m)
      throw new CountQuerySyntaxError(
        pos,
        `Unexpected character at ${pos}: "${text.slice(pos, pos + 10)}…".`,
      );
    const at = m.index + (m[0].length - m[0].trimStart().length);
    if (m[1]) tokens.push({ kind: 'duration', text: m[1], at });
    else if (m[2]) tokens.push({ kind: 'number', text: m[2], at });
    else if (m[3] !== undefined) tokens.push({ kind: 'string', text: m[3].replaceAll("''", "'"), at });
    else if (m[4]) tokens.push({ kind: 'word', text: m[4], at });
    else tokens.push({ kind: 'symbol', text: m[5] as string, at });
    pos = re.lastIndex;
  }
  tokens.push({ kind: 'end', text: 'end of query', at: text.length });
  return tokens;
}

const DURATION_UNITS: Record<string, number> = { m: MINUTE_MS, h: HOUR_MS, d: DAY_MS };

/**
 * Parses the text form into a user id and a {@link CountQuery} with one range.
 * @param now the injected clock's time, for `now()`
 */
export function parseCountQuery(
  text: string,
  now: number,
  schema: EventSchema = actionEventSchema,
): ParsedCountQuery {
  const tokens = tokenize(text);
  let i = 0;
  const peek = () => tokens[i] as Token;
  const next = () => tokens[i++] as Token;
  const fail = (expected: string): never => {
    const t = peek();
    throw new CountQuerySyntaxError(t.at, `Expected ${expected} at position ${t.at}, found "${t.text}".`);
  };
  const keyword = (word: string) => {
    const t = peek();
    if (t.kind === 'word' && t.text.toUpperCase() === word) return next();
    return fail(word);
  };
  const isKeyword = (word: string) => peek().kind === 'word' && peek().text.toUpperCase() === word;
  const symbol = (s: string) => (peek().kind === 'symbol' && peek().text === s ? next() : fail(`"${s}"`));
  const dimension = (): string => {
    const t = peek();
    if (t.kind !== 'word' || !schema.dimension(t.text)) {
      return fail(`a dimension (${schema.dimensions.join(', ')})`);
    }
    return next().text;
  };
  const value = (): string | number => {
    const t = next();
    if (t.kind === 'number') return t.text.length > 15 ? t.text : Number(t.text);
    if (t.kind === 'string' || t.kind === 'word') return t.text;
    i--;
    return fail('a value (number or quoted string)');
  };
  const instant = (): number => {
    const t = peek();
    if (t.kind === 'word' && t.text.toLowerCase() === 'now') {
      next();
      symbol('(');
      symbol(')');
      if (peek().kind === 'symbol' && peek().text === '-') {
        next();
        const d = peek();
        if (d.kind !== 'duration') return fail('a duration such as 15m, 6h or 7d');
        next();
        return now - Number(d.text.slice(0, -1)) * (DURATION_UNITS[d.text.slice(-1)] as number);
      }
      return now;
    }
    if (t.kind === 'number') return Number(next().text);
    if (t.kind === 'string') {
      const ms = Date.parse(t.text);
      if (Number.isNaN(ms)) return fail('an ISO date');
      next();
      return ms;
    }
    return fail('now(), now() - <duration>, epoch ms or an ISO date string');
  };

  keyword('SELECT');
  keyword('COUNT');
  symbol('(');
  symbol('*');
  symbol(')');
  keyword('FROM');
  keyword('ACTIONS');
  keyword('WHERE');
  let userId: string | undefined;
  let from = 0;
  let to = Number.MAX_SAFE_INTEGER;
  const filter: Record<string, (string | number)[]> = {};
  for (;;) {
    const t = peek();
    if (t.kind === 'word' && t.text.toLowerCase() === 'user') {
      next();
      symbol('=');
      if (userId !== undefined)
        throw new CountQuerySyntaxError(t.at, 'user is given twice: a query counts one user.');
      userId = String(value());
    } else if (t.kind === 'word' && t.text.toLowerCase() === 'time') {
      next();
      if (isKeyword('BETWEEN')) {
        next();
        from = Math.max(from, instant());
        keyword('AND');
        to = Math.min(to, instant());
      } else {
        const op = next();
        if (op.kind !== 'symbol' || !['<', '<=', '>', '>='].includes(op.text)) {
          i--;
          fail('<, <=, > or >= after time');
        }
        const at = instant();
        if (op.text === '>') from = Math.max(from, at + 1);
        else if (op.text === '>=') from = Math.max(from, at);
        else if (op.text === '<') to = Math.min(to, at);
        else to = Math.min(to, at + 1);
      }
    } else {
      const dim = dimension();
      const values: (string | number)[] = [];
      if (isKeyword('IN')) {
        next();
        symbol('(');
        values.push(value());
        while (peek().text === ',') {
          next();
          values.push(value());
        }
        symbol(')');
      } else {
        symbol('=');
        values.push(value());
      }
      filter[dim] = [...(filter[dim] ?? []), ...values];
    }
    if (!isKeyword('AND')) break;
    next();
  }
  const groupBy: string[] = [];
  if (isKeyword('GROUP')) {
    next();
    keyword('BY');
    groupBy.push(dimension());
    while (peek().text === ',') {
      next();
      groupBy.push(dimension());
    }
  }
  if (peek().kind !== 'end') fail('AND, GROUP BY or the end of the query');
  if (userId === undefined)
    throw new CountQuerySyntaxError(0, 'The WHERE clause must name the user: user = <id>.');
  if (from >= to)
    throw new CountQuerySyntaxError(0, `The time conditions leave an empty range [${from}, ${to}).`);
  const query: CountQuery = {
    ranges: [{ from, to }],
    ...(Object.keys(filter).length > 0 ? { filter: filter as DimensionFilter } : {}),
    ...(groupBy.length > 0 ? { groupBy } : {}),
  };
  return { userId, query };
}
