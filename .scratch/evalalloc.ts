import { Redis } from 'ioredis';
import { startRedis } from '../local/emulators/redis.js';
import { ingestRecords } from '../shared/counting/ingest.js';
import { type CapCandidate, evaluateCaps, type FrequencyCap } from '../shared/counting/query.js';
import { encodeActionEvent } from '../shared/counting/schema.js';
import { ActionStore } from '../shared/counting/store.js';
import { prng } from '../shared/random/prng.js';
import { DAY_MS, HOUR_MS, ManualClock } from '../shared/time/clock.js';
const entities = (ad: number) => ({ ad: 1_000_000 + ad, adGroup: 200_000 + Math.floor(ad / 4), campaign: 30_000 + Math.floor(ad / 16), advertiser: 4_000 + Math.floor(ad / 64) });
const CAP_LIMITS = [[2, 8, 20], [4, 20, 60], [10, 60, 200], [30, 150, 400]];
const rand = prng(7);
const now = Date.UTC(2026, 10, 20, 12);
function makeEvent(userId: number, ad: number): Buffer {
  const insertion = Buffer.alloc(16);
  insertion.writeUInt32BE(Math.floor(rand() * 2 ** 32), 0);
  insertion.writeUInt32BE(Math.floor(rand() * 2 ** 32), 4);
  insertion.writeUInt32BE(userId, 8);
  insertion[15] = 1;
  return encodeActionEvent({ userId, timestamp: now - Math.floor(rand() * 30 * DAY_MS), insertionId: insertion, action: rand() < 0.9 ? 1 : 2, viewType: 1 + Math.floor(rand() * 3), ...entities(ad) });
}
const server = await startRedis({ mode: "standalone" }); const port = Number(server.nodes[0]?.split(":")[1]);
const client = new Redis({ host: "127.0.0.1", port, enableAutoPipelining: false });
const store = new ActionStore({ redis: client, clock: new ManualClock(now) });
const candidateAds = Array.from({ length: 50 }, (_, i) => i * 3);
const users = Array.from({ length: 5 }, (_, i) => String(9_000_000 + i));
const recs: Buffer[] = [];
for (const u of users) for (let k = 0; k < 1000; k++) recs.push(makeEvent(Number(u), rand() < 0.6 ? (candidateAds[Math.floor(rand() * 50)] as number) : Math.floor(rand() * 400)));
await ingestRecords(store, recs);
const logs = await Promise.all(users.map((u) => store.eventLog(u)));
const windows = [HOUR_MS, 7 * DAY_MS, 30 * DAY_MS];
const candidates: CapCandidate[] = candidateAds.map((ad) => ({ id: String(ad), entities: entities(ad), caps: (['ad', 'adGroup', 'campaign', 'advertiser'] as const).flatMap((level, li) => windows.map((windowMs, wi): FrequencyCap => ({ level, windowMs, max: CAP_LIMITS[li]?.[wi] ?? 1 }))) }));
client.disconnect(); await server.stop();
let gcs = 0;
const { PerformanceObserver } = await import('node:perf_hooks');
new PerformanceObserver((l) => { gcs += l.getEntries().length; }).observe({ entryTypes: ['gc'] });
let sink = 0;
for (let i = 0; i < 20000; i++) sink += evaluateCaps(logs[i % 5] as Buffer, candidates, now, now - 30 * DAY_MS).rejected.length;
for (let r = 0; r < 5; r++) {
  await new Promise((res) => setTimeout(res, 50));
  const g0 = gcs; const h0 = process.memoryUsage().heapUsed;
  for (let i = 0; i < 1000; i++) sink += evaluateCaps(logs[i % 5] as Buffer, candidates, now, now - 30 * DAY_MS).rejected.length;
  const h1 = process.memoryUsage().heapUsed;
  await new Promise((res) => setTimeout(res, 10));
  console.log('bytes/check', ((h1 - h0) / 1000).toFixed(0), 'gcs during', gcs - g0, 'rej', sink > 0);
}
if (process.env.LIVE) {
  const { Session } = await import('node:inspector/promises');
  const { writeFileSync } = await import('node:fs');
  const session = new Session(); session.connect();
  await session.post('HeapProfiler.startSampling', { samplingInterval: 128 } as never);
  for (let i = 0; i < 5000; i++) sink += evaluateCaps(logs[i % 5] as Buffer, candidates, now, now - 30 * DAY_MS).rejected.length;
  const { profile } = await session.post('HeapProfiler.stopSampling') as never as { profile: unknown };
  writeFileSync('/tmp/heap.json', JSON.stringify(profile));
}
