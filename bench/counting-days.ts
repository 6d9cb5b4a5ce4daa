/**
 * The day summary of the counting benchmark (docs/counting.md, "Long windows: the day summary"):
 * CTV-like households that see a few campaigns many times a day — 30 events a day for 90 days on
 * 8 ads — checked with caps over 90 days (a lifetime over an 85-day flight, 60- and 89-day
 * windows) beside a 1-day cap, by a store that reads days past its 8 raw days through the
 * summary and, on the same keys, by one that reads the whole log (raw days = the retention) and
 * by one that reads the cap log (the default).
 * Events arrive a day at a time, so each household's summary is kept as maintenance keeps it.
 */
import type { Redis } from 'ioredis';
import { encodeActionEvent } from '../shared/counting/event-encode.js';
import { ingestRecords } from '../shared/counting/ingest.js';
import type { CapCandidate } from '../shared/counting/query.js';
import { ActionStore, userAggregatesKey, userDaysKey } from '../shared/counting/store.js';
import { prng } from '../shared/random/prng.js';
import { DAY_MS, ManualClock } from '../shared/time/clock.js';
import { fullCollection } from './counting-phases.js';
import { entities, percentile, round } from './counting-workload.js';

const USERS = 50;
const DAYS = 90;
const EVENTS_PER_DAY = 30;
/** Days read event by event: a week and today (windows up to 7 days never touch the summary). */
const RAW_DAYS = 8;

const mean = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

/** Microseconds redis-server has spent in scripts (EVAL and EVALSHA) so far. */
async function scriptUs(client: Redis): Promise<number> {
  const info = await client.info('commandstats');
  let us = 0;
  for (const m of info.matchAll(/cmdstat_eval(?:sha)?:calls=\d+,usec=(\d+)/g)) us += Number(m[1]);
  return us;
}

/** Checks of `store` one at a time: P99 (ms), checks/s and client CPU per check (µs). */
async function measure(
  store: ActionStore,
  users: readonly string[],
  candidates: CapCandidate[],
  checks: number,
) {
  for (let i = 0; i < Math.min(checks, 1000); i++) {
    await store.checkFrequencyCaps({ userId: users[i % users.length] as string, candidates });
  }
  const latencies: number[] = [];
  const cpu0 = process.cpuUsage();
  const start = performance.now();
  for (let i = 0; i < checks; i++) {
    const t0 = performance.now();
    await store.checkFrequencyCaps({ userId: users[i % users.length] as string, candidates });
    latencies.push(performance.now() - t0);
  }
  const wall = (performance.now() - start) / 1000;
  const cpu = process.cpuUsage(cpu0);
  latencies.sort((a, b) => a - b);
  return {
    p99Ms: round(percentile(latencies, 99)),
    perSec: Math.round(checks / wall),
    cpuUs: round((cpu.user + cpu.system) / checks, 1),
  };
}

/** The day-summary figures: the same checks through the summary and over the whole log. */
export async function daySummaryChecks(
  client: Redis,
  now: number,
  checks: number,
  collect: boolean,
): Promise<Record<string, unknown>> {
  const clock = new ManualClock(now - DAYS * DAY_MS);
  const options = { redis: client, clock, retentionDays: 90, keyPrefix: 'days' } as const;
  const summarised = new ActionStore({ ...options, rawDays: RAW_DAYS, capLogReads: false });
  const whole = new ActionStore({ ...options, rawDays: 90, capLogReads: false });
  const capLog = new ActionStore({ ...options, rawDays: RAW_DAYS });
  // The same events on other keys, written without summaries (their maintenance cost).
  const unsummarised = new ActionStore({ ...options, keyPrefix: 'days0', rawDays: 90 });
  const redisUs = { summarised: [] as number[], none: [] as number[] };
  const users = Array.from({ length: USERS }, (_, i) => String(6_000_000 + i));
  const rand = prng(44);
  let insertion = 0;
  for (let day = 0; day < DAYS; day++) {
    clock.set(now - (DAYS - day - 1) * DAY_MS);
    const records: Buffer[] = [];
    for (const u of users) {
      for (let k = 0; k < EVENTS_PER_DAY; k++) {
        const insertionId = Buffer.alloc(16);
        insertionId.writeUInt32BE(++insertion, 12);
        records.push(
          encodeActionEvent({
            userId: u,
            timestamp: clock.now() - Math.floor(rand() * DAY_MS),
            insertionId,
            action: rand() < 0.95 ? 1 : 2,
            viewType: 1,
            ...entities(Math.floor(rand() * 8) * 3),
          }),
        );
      }
    }
    // The same day's writes with and without summaries (each user maintained once a day, as in
    // production): Redis time of the ingest script over the last 30 days.
    for (const [store, spent] of [
      [summarised, redisUs.summarised],
      [unsummarised, redisUs.none],
    ] as const) {
      const before = await scriptUs(client);
      const { malformed } = await ingestRecords(store, records);
      if (malformed.length > 0)
        throw new Error(`${malformed.length} events refused: ${malformed[0]?.error.message}`);
      if (day >= DAYS - 30) spent.push((await scriptUs(client)) - before);
    }
  }
  clock.set(now);
  // The 50 candidate ads of the counting workload; the households' 8 ads are among them.
  const candidates: CapCandidate[] = Array.from({ length: 50 }, (_, i) => ({
    id: String(i * 3),
    entities: entities(i * 3),
    flightStartMs: now - 85 * DAY_MS + 12_345,
    caps: [
      { level: 'ad', windowMs: DAY_MS, max: 40 },
      { level: 'campaign', lifetime: true, max: 3000 },
      { level: 'adGroup', windowMs: 60 * DAY_MS, max: 2000 },
      { level: 'advertiser', windowMs: 89 * DAY_MS, max: 3000 },
    ],
  }));
  // As before the other cap-check phases: the 90 days of ingest garbage are not the checks'.
  if (collect) fullCollection();
  // Alternated, twice each, the second of each kept: neither runs colder than the other.
  await measure(whole, users, candidates, checks);
  await measure(summarised, users, candidates, checks);
  await measure(capLog, users, candidates, checks);
  const wholeLog = await measure(whole, users, candidates, checks);
  const through = await measure(summarised, users, candidates, checks);
  const overCapLog = await measure(capLog, users, candidates, checks);
  if (capLog.capLogMisses > 0) throw new Error(`${capLog.capLogMisses} checks found no cap log`);
  let logBytes = 0;
  let summaryBytes = 0;
  for (const u of users) {
    logBytes += Number(await client.call('MEMORY', 'USAGE', summarised.logKey(u), 'SAMPLES', '0'));
    for (const key of [userDaysKey(u, 'days'), userAggregatesKey(u, 'days')])
      summaryBytes += Number(await client.call('MEMORY', 'USAGE', key, 'SAMPLES', '0'));
  }
  const { whole: fellBack, noGain } = summarised.daySummaryReads;
  if (fellBack + noGain > 0)
    throw new Error(`${fellBack + noGain} day-summary checks read the whole log (${noGain} for no gain)`);
  return {
    daySummaryShape:
      `${EVENTS_PER_DAY} events a day for ${DAYS} days on 8 ads per user; 50 candidates x (1-day, 60-day, 89-day and lifetime ` +
      `over an 85-day flight); ${RAW_DAYS} raw days, the rest through the summary vs the whole log`,
    daySummaryCheckP99Ms: through.p99Ms,
    daySummaryChecksPerSec: through.perSec,
    daySummaryCheckClientCpuUs: through.cpuUs,
    wholeLogCheckP99Ms: wholeLog.p99Ms,
    wholeLogChecksPerSec: wholeLog.perSec,
    wholeLogCheckClientCpuUs: wholeLog.cpuUs,
    daySummaryCpuRatio: round(through.cpuUs / wholeLog.cpuUs),
    // The same checks over the cap log (what a store reads by default).
    capLogLongCheckP99Ms: overCapLog.p99Ms,
    capLogLongChecksPerSec: overCapLog.perSec,
    capLogLongCheckClientCpuUs: overCapLog.cpuUs,
    capLogLongCpuRatio: round(overCapLog.cpuUs / wholeLog.cpuUs),
    // Redis time of a user's daily write (30 events and its maintenance), with and without.
    daySummaryWriteRedisUsPerUserDay: round(mean(redisUs.summarised) / USERS, 1),
    noSummaryWriteRedisUsPerUserDay: round(mean(redisUs.none) / USERS, 1),
    // Memory of the summary (day table + aggregates) beside the log's, over the same users.
    daySummaryBytesPerLogByte: round(summaryBytes / logBytes),
  };
}
