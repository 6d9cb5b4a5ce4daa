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

import { inputErrorKind } from '../errors.js';
import { DAY_MS, HOUR_MS, MINUTE_MS } from '../time/clock.js';
import type { CountQuery, DimensionFilter } from './query.js';
import { actionEventSchema, type EventSchema } from './schema.js';

/** Thrown for text that is not a valid count query; the message shows where and what was expected. */
export class CountQuerySyntaxError extends inputErrorKind<'position', number>(
  'CountQuerySyntaxError',
  'counting.query-syntax',
  'position',
) {}

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

/** The conditions of a WHERE clause, gathered. */
interface Conditions {
  userId: string | undefined;
  from: number;
  to: number;
  readonly filter: Record<string, (string | number)[]>;
}

/** A recursive-descent reader over the tokens: one method per piece of the grammar. */
class QueryReader {
  private i = 0;
  constructor(
    private readonly tokens: readonly Token[],
    private readonly now: number,
    private readonly schema: EventSchema,
  ) {}

  peek(): Token {
    return this.tokens[this.i] as Token;
  }

  next(): Token {
    return this.tokens[this.i++] as Token;
  }

  /** Throws the syntax error for the current token. */
  fail(expected: string): never {
    const t = this.peek();
    throw new CountQuerySyntaxError(t.at, `Expected ${expected} at position ${t.at}, found "${t.text}".`);
  }

  keyword(word: string): Token {
    return this.isKeyword(word) ? this.next() : this.fail(word);
  }

  isKeyword(word: string): boolean {
    const t = this.peek();
    return t.kind === 'word' && t.text.toUpperCase() === word;
  }

  symbol(s: string): Token {
    const t = this.peek();
    return t.kind === 'symbol' && t.text === s ? this.next() : this.fail(`"${s}"`);
  }

  dimension(): string {
    const t = this.peek();
    if (t.kind !== 'word' || !this.schema.dimension(t.text)) {
      return this.fail(`a dimension (${this.schema.dimensions.join(', ')})`);
    }
    return this.next().text;
  }

  value(): string | number {
    const t = this.next();
    if (t.kind === 'number') return t.text.length > 15 ? t.text : Number(t.text);
    if (t.kind === 'string' || t.kind === 'word') return t.text;
    this.i--;
    return this.fail('a value (number or quoted string)');
  }

  /** `now()`, `now() - <duration>`, epoch ms or an ISO date string. */
  instant(): number {
    const t = this.peek();
    if (t.kind === 'word' && t.text.toLowerCase() === 'now') {
      this.next();
      this.symbol('(');
      this.symbol(')');
      if (this.peek().kind === 'symbol' && this.peek().text === '-') {
        this.next();
        const d = this.peek();
        if (d.kind !== 'duration') return this.fail('a duration such as 15m, 6h or 7d');
        this.next();
        return this.now - Number(d.text.slice(0, -1)) * (DURATION_UNITS[d.text.slice(-1)] as number);
      }
      return this.now;
    }
    if (t.kind === 'number') return Number(this.next().text);
    if (t.kind === 'string') {
      const ms = Date.parse(t.text);
      if (Number.isNaN(ms)) return this.fail('an ISO date');
      this.next();
      return ms;
    }
    return this.fail('now(), now() - <duration>, epoch ms or an ISO date string');
  }

  /** `SELECT COUNT(*) FROM actions WHERE`. */
  head(): void {
    this.keyword('SELECT');
    this.keyword('COUNT');
    this.symbol('(');
    this.symbol('*');
    this.symbol(')');
    this.keyword('FROM');
    this.keyword('ACTIONS');
    this.keyword('WHERE');
  }

  /** The WHERE clause's conditions joined by AND. */
  conditions(): Conditions {
    const c: Conditions = { userId: undefined, from: 0, to: Number.MAX_SAFE_INTEGER, filter: {} };
    for (;;) {
      const t = this.peek();
      if (t.kind === 'word' && t.text.toLowerCase() === 'user') {
        this.next();
        this.symbol('=');
        if (c.userId !== undefined)
          throw new CountQuerySyntaxError(t.at, 'user is given twice: a query counts one user.');
        c.userId = String(this.value());
      } else if (t.kind === 'word' && t.text.toLowerCase() === 'time') {
        this.next();
        this.timeCondition(c);
      } else {
        const dim = this.dimension();
        c.filter[dim] = [...(c.filter[dim] ?? []), ...this.values()];
      }
      if (!this.isKeyword('AND')) return c;
      this.next();
    }
  }

  /** After `time`: `BETWEEN a AND b` or a comparison; narrows the range. */
  private timeCondition(c: Conditions): void {
    if (this.isKeyword('BETWEEN')) {
      this.next();
      c.from = Math.max(c.from, this.instant());
      this.keyword('AND');
      c.to = Math.min(c.to, this.instant());
      return;
    }
    const op = this.next();
    if (op.kind !== 'symbol' || !['<', '<=', '>', '>='].includes(op.text)) {
      this.i--;
      this.fail('<, <=, > or >= after time');
    }
    const at = this.instant();
    if (op.text === '>') c.from = Math.max(c.from, at + 1);
    else if (op.text === '>=') c.from = Math.max(c.from, at);
    else if (op.text === '<') c.to = Math.min(c.to, at);
    else c.to = Math.min(c.to, at + 1);
  }

  /** After a dimension: `= v` or `IN (v, …)`. */
  private values(): (string | number)[] {
    if (!this.isKeyword('IN')) {
      this.symbol('=');
      return [this.value()];
    }
    this.next();
    this.symbol('(');
    const values = this.commaList(() => this.value());
    this.symbol(')');
    return values;
  }

  /** One item or more, separated by commas (`a, b, c`). */
  private commaList<T>(item: () => T): T[] {
    const items = [item()];
    while (this.peek().text === ',') {
      this.next();
      items.push(item());
    }
    return items;
  }

  /** An optional `GROUP BY d, …`. */
  groupBy(): string[] {
    if (!this.isKeyword('GROUP')) return [];
    this.next();
    this.keyword('BY');
    return this.commaList(() => this.dimension());
  }
}

/**
 * Parses the text form into a user id and a {@link CountQuery} with one range.
 * @param now the injected clock's time, for `now()`
 */
export function parseCountQuery(
  text: string,
  now: number,
  schema: EventSchema = actionEventSchema,
): ParsedCountQuery {
  const reader = new QueryReader(tokenize(text), now, schema);
  reader.head();
  const { userId, from, to, filter } = reader.conditions();
  const groupBy = reader.groupBy();
  if (reader.peek().kind !== 'end') reader.fail('AND, GROUP BY or the end of the query');
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
