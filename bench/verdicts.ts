/**
 * Pass/fail verdicts of a benchmark against its DESIGN.md targets, and warnings when an offered
 * rate was not sustained — pure over the benchmark's result object (bench/main.ts adds both to
 * the JSON line as `verdicts` and `warnings`, leaving every other field as it was).
 */

/** One target: the result field (dotted path), how it compares, and the value. */
export interface BenchTarget {
  readonly metric: string;
  readonly op: '>=' | '<=';
  readonly value: number;
  readonly description: string;
}

/** One verdict. */
export interface Verdict {
  readonly metric: string;
  readonly target: string;
  /** The measured value; null when the result does not carry it (a fail). */
  readonly measured: number | null;
  readonly pass: boolean;
}

/** The targets of each benchmark (DESIGN.md; docs/benchmarks.md "Current figures against DESIGN.md targets"). */
export const benchTargets: Readonly<Record<string, readonly BenchTarget[]>> = {
  counting: [
    {
      metric: 'ingestEventsPerSec',
      op: '>=',
      value: 50_000,
      description: 'action ingest ≥ 50,000 events/s per process',
    },
    { metric: 'capCheckP99Ms', op: '<=', value: 2, description: 'cap check P99 ≤ 2 ms' },
    { metric: 'capChecksPerSec', op: '>=', value: 5_000, description: 'cap checks ≥ 5,000/s per process' },
    {
      metric: 'capCheckAtTargetRate.p99Ms',
      op: '<=',
      value: 2,
      description: 'cap check P99 ≤ 2 ms at 5,000 checks/s offered',
    },
    {
      metric: 'capCheckCpuShareAtTargetRate',
      op: '<=',
      value: 0.4,
      description: '≤ 40 % of one core used at 5,000 cap checks/s',
    },
    {
      metric: 'combinedCheckP99Ms',
      op: '<=',
      value: 2,
      description: 'recency + 90-day lifetime + household cap check P99 ≤ 2 ms',
    },
    {
      metric: 'combinedChecksPerSec',
      op: '>=',
      value: 5_000,
      description: 'combined cap checks ≥ 5,000/s per process',
    },
    {
      metric: 'daySummaryCpuRatio',
      op: '<=',
      value: 1,
      description: 'a 90-day check through the day summary costs no more client CPU than over the whole log',
    },
    {
      metric: 'freshnessP99Ms',
      op: '<=',
      value: 2_000,
      description: 'event sent → countable P99 ≤ 2,000 ms through the local stream path',
    },
  ],
  spend: [
    {
      metric: 'decisionsPerSec',
      op: '>=',
      value: 500_000,
      description: 'budget guard ≥ 500,000 decisions/s per process',
    },
    {
      metric: 'redisOpsPer1000Bids',
      op: '<=',
      value: 10,
      description: '≤ 10 Redis round trips per 1,000 bids',
    },
  ],
  pacer: [
    {
      metric: 'tickMsFor100kCampaigns',
      op: '<=',
      value: 2_000,
      description: 'a tick over 100,000 campaigns ≤ 2 s',
    },
    {
      metric: 'takeoverTickMs',
      op: '<=',
      value: 5_000,
      description: "a new leader's first tick over 100,000 campaigns ≤ 5 s",
    },
    {
      metric: 'remoteReadReduction',
      op: '>=',
      value: 0.9,
      description: 'reader remote reads reduced ≥ 90 %',
    },
    {
      metric: 'readerLookupsPerSec',
      op: '>=',
      value: 1_000_000,
      description: 'reader ≥ 1,000,000 cached lookups/s',
    },
  ],
  sim: [
    {
      // Only a full-day run of the whole workload carries it (a scaled run reports null: no verdict
      // can be drawn from it).
      metric: 'dayWallSeconds',
      op: '<=',
      value: 600,
      description: 'a day of 1,000 campaigns and 10 million auctions in ≤ 10 minutes',
    },
  ],
};

function at(result: unknown, path: string): unknown {
  return path
    .split('.')
    .reduce<unknown>(
      (v, k) => (v !== null && typeof v === 'object' ? (v as Record<string, unknown>)[k] : undefined),
      result,
    );
}

/** A verdict per target of `name` over `result`. */
export function verdicts(name: string, result: Readonly<Record<string, unknown>>): Verdict[] {
  return (benchTargets[name] ?? []).map((t) => {
    const v = at(result, t.metric);
    const measured = typeof v === 'number' && Number.isFinite(v) ? v : null;
    const pass = measured !== null && (t.op === '>=' ? measured >= t.value : measured <= t.value);
    return { metric: t.metric, target: `${t.op} ${t.value} (${t.description})`, measured, pass };
  });
}

/**
 * Every `{offeredPerSec, achievedPerSec}` object in the result whose achieved rate fell more than
 * `tolerance` short of the offered one: the figures measured at it describe a lower rate.
 */
export function unsustainedRates(result: unknown, tolerance = 0.02, path = ''): string[] {
  if (result === null || typeof result !== 'object') return [];
  const r = result as Record<string, unknown>;
  const out: string[] = [];
  if (typeof r.offeredPerSec === 'number' && typeof r.achievedPerSec === 'number') {
    if (r.achievedPerSec < r.offeredPerSec * (1 - tolerance))
      out.push(
        `${path || 'result'}: offered ${r.offeredPerSec}/s but sustained only ${r.achievedPerSec}/s: figures measured at this rate describe the lower rate`,
      );
  }
  for (const [k, v] of Object.entries(r))
    out.push(...unsustainedRates(v, tolerance, path ? `${path}.${k}` : k));
  return out;
}
