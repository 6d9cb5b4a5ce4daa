/**
 * The combined cap check of the counting benchmark: today's 50 candidates × 12 frequency caps,
 * plus on every candidate a recency cap (30 min on the campaign), a lifetime cap over a flight of
 * 89 days (the campaign) and a household cap (7 days on the advertiser) — a store that keeps 90
 * days, users with 1,000 events over 90 days, two users per household (so a household's log holds
 * 2,000 events). The check reads the user's and the household's logs in one round trip.
 */
import type { Redis } from 'ioredis';
import { encodeActionEvent } from '../shared/counting/event-encode.js';
import { ingestRecords } from '../shared/counting/ingest.js';
import type { CapCandidate, CapRule } from '../shared/counting/query.js';
import { ActionStore, type CapCheckRequest } from '../shared/counting/store.js';
import { prng } from '../shared/random/prng.js';
import { DAY_MS, ManualClock, MINUTE_MS } from '../shared/time/clock.js';
import { fullCollection } from './counting-phases.js';
import { type CountingWorkload, capCandidates, entities, percentile, round } from './counting-workload.js';

const USERS = 100;
const EVENTS_PER_USER = 1000;
const SPAN_DAYS = 90;

const householdOf = (user: number) => 700_000 + Math.floor(user / 2);

/** The users' events: 1,000 each over 90 days on 400 ads, 60% on the candidates, with households. */
function events(w: CountingWorkload, users: readonly number[]): Buffer[] {
  const rand = prng(43);
  const out: Buffer[] = [];
  for (const u of users) {
    for (let k = 0; k < EVENTS_PER_USER; k++) {
      const ad =
        rand() < 0.6 ? (w.candidateAds[Math.floor(rand() * 50)] as number) : Math.floor(rand() * 400);
      const insertion = Buffer.alloc(16);
      insertion.writeUInt32BE(Math.floor(rand() * 2 ** 32), 0);
      insertion.writeUInt32BE(u, 8);
      insertion[15] = 2;
      out.push(
        encodeActionEvent({
          userId: u,
          householdId: householdOf(u),
          timestamp: w.now - Math.floor(rand() * SPAN_DAYS * DAY_MS),
          insertionId: insertion,
          action: rand() < 0.9 ? 1 : 2,
          viewType: 1 + Math.floor(rand() * 3),
          ...entities(ad),
        }),
      );
    }
  }
  return out;
}

/** Today's candidates with the three caps of the combined check added. */
function combinedCandidates(w: CountingWorkload): CapCandidate[] {
  const extra: CapRule[] = [
    { level: 'campaign', recencyMs: 30 * MINUTE_MS },
    { level: 'campaign', lifetime: true, max: 120 },
    { level: 'advertiser', windowMs: 7 * DAY_MS, max: 80, key: 'household' },
  ];
  return capCandidates(w).map((c) => ({
    ...c,
    caps: [...c.caps, ...extra],
    flightStartMs: w.now - 89 * DAY_MS,
  }));
}

/** `checks` checks of `store` with 4 in flight: checks/s and client CPU per check (µs). */
async function closedLoop(
  store: ActionStore,
  request: (i: number) => CapCheckRequest,
  checks: number,
): Promise<{ perSec: number; cpuUs: number }> {
  const concurrency = 4;
  const cpu0 = process.cpuUsage();
  const start = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async (_, k) => {
      for (let i = k; i < checks; i += concurrency) await store.checkFrequencyCaps(request(i));
    }),
  );
  const wall = (performance.now() - start) / 1000;
  const cpu = process.cpuUsage(cpu0);
  return { perSec: Math.round(checks / wall), cpuUs: round((cpu.user + cpu.system) / checks, 1) };
}

/** The combined check's figures: P50 / P99 one at a time, checks/s and client CPU with 4 in flight. */
export async function combinedChecks(
  client: Redis,
  w: CountingWorkload,
  checks: number,
  collect: boolean,
): Promise<Record<string, unknown>> {
  const options = { redis: client, clock: new ManualClock(w.now), retentionDays: 90, keyPrefix: 'cmb' };
  const store = new ActionStore(options);
  const users = Array.from({ length: USERS }, (_, i) => 8_000_000 + i);
  const records = events(w, users);
  for (let i = 0; i < records.length; i += 2000) await ingestRecords(store, records.slice(i, i + 2000));
  const candidates = combinedCandidates(w);
  const request = (i: number) => {
    const u = users[i % users.length] as number;
    return { identities: { user: String(u), household: String(householdOf(u)) }, candidates };
  };
  for (let i = 0; i < Math.min(checks, 1000); i++) await store.checkFrequencyCaps(request(i));
  // As before the other cap-check phases: this phase's own ingest garbage is not the checks'.
  if (collect) fullCollection();
  const latencies: number[] = [];
  let rejected = 0;
  for (let i = 0; i < checks; i++) {
    const t0 = performance.now();
    const r = await store.checkFrequencyCaps(request(i));
    latencies.push(performance.now() - t0);
    rejected += r.rejected.length;
  }
  latencies.sort((a, b) => a - b);
  const loaded = await closedLoop(store, request, checks);
  // The same over the logs (day summary, whole log), for comparison.
  const overLogs = new ActionStore({ ...options, capLogReads: false });
  await closedLoop(overLogs, request, Math.min(checks, 1000));
  const logs = await closedLoop(overLogs, request, checks);
  if (store.capLogMisses > 0) throw new Error(`${store.capLogMisses} combined checks found no cap log`);
  return {
    combinedCheckShape:
      '50 candidates x (12 frequency caps + recency 30 min + lifetime over an 89-day flight + household 7 d); ' +
      `user with ${EVENTS_PER_USER} events over ${SPAN_DAYS} days, household of 2 users (two logs, one round trip)`,
    combinedCheckP50Ms: round(percentile(latencies, 50)),
    combinedCheckP99Ms: round(percentile(latencies, 99)),
    combinedChecksPerSec: loaded.perSec,
    combinedCheckClientCpuUs: loaded.cpuUs,
    combinedChecksPerSecLogReads: logs.perSec,
    combinedCheckClientCpuUsLogReads: logs.cpuUs,
    combinedCheckRejectedPerCheck: round(rejected / checks, 1),
  };
}
