import { Session } from 'node:inspector/promises';
import { writeFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import { startRedis } from '../local/emulators/redis.js';
import { ingestRecords } from '../shared/counting/ingest.js';
import type { CapCandidate, FrequencyCap } from '../shared/counting/query.js';
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
const users = Array.from({ length: 50 }, (_, i) => String(9_000_000 + i));
const recs: Buffer[] = [];
for (const u of users) for (let k = 0; k < Number(process.env.EV ?? 1000); k++) recs.push(makeEvent(Number(u), rand() < 0.6 ? (candidateAds[Math.floor(rand() * 50)] as number) : Math.floor(rand() * 400)));
for (let i = 0; i < recs.length; i += 2000) await ingestRecords(store, recs.slice(i, i + 2000));
const windows = [HOUR_MS, 7 * DAY_MS, 30 * DAY_MS];
const candidates: CapCandidate[] = candidateAds.map((ad) => ({ id: String(ad), entities: entities(ad), caps: (['ad', 'adGroup', 'campaign', 'advertiser'] as const).flatMap((level, li) => windows.map((windowMs, wi): FrequencyCap => ({ level, windowMs, max: CAP_LIMITS[li]?.[wi] ?? 1 }))) }));
const N = Number(process.argv[2] ?? 20000);
for (let i = 0; i < 3000; i++) await store.checkFrequencyCaps({ userId: users[i % 50] as string, candidates });
const mode = process.argv[3] ?? 'time';
if (mode === 'opencpu') {
  const { openLoop } = await import('../bench/open-loop.js');
  await openLoop({ ratePerSec: 5000, total: 1000, run: (i) => store.checkFrequencyCaps({ userId: users[i % 50] as string, candidates }) });
  const session = new Session(); session.connect();
  await session.post('Profiler.enable'); await session.post('Profiler.start');
  await openLoop({ ratePerSec: 5000, total: 20000, run: (i) => store.checkFrequencyCaps({ userId: users[i % 50] as string, candidates }) });
  const { profile } = await session.post('Profiler.stop'); writeFileSync('/tmp/cpu.cpuprofile', JSON.stringify(profile));
  client.disconnect(); await server.stop(); process.exit(0);
}
if (mode === 'diag') {
  const { PerformanceObserver, monitorEventLoopDelay } = await import('node:perf_hooks');
  const gcs: [number, number, number][] = [];
  const obs = new PerformanceObserver((l) => { for (const e of l.getEntries()) gcs.push([e.startTime, e.duration, (e as unknown as {detail:{kind:number}}).detail?.kind]); });
  obs.observe({ entryTypes: ['gc'] });
  const { Worker } = await import('node:worker_threads');
  const rate = 5000, total = 10000, periodNs = 1e9 / rate;
  const nowNs = () => Number(process.hrtime.bigint());
  const startNs = nowNs() + 20e6; const perfStart = performance.now() + 20;
  const lag = new Float64Array(total), lat = new Float64Array(total);
  const w = new Worker(`const { parentPort, workerData } = require('node:worker_threads'); const { startNs, periodNs, total } = workerData; const cell = new Int32Array(new SharedArrayBuffer(4)); for (let i = 0; i < total; i++) { const due = startNs + i * periodNs; const waitMs = (due - Number(process.hrtime.bigint())) / 1e6; if (waitMs > 0) Atomics.wait(cell, 0, 0, waitMs); parentPort.postMessage([i, Number(process.hrtime.bigint())]); }`, { eval: true, workerData: { startNs, periodNs, total } });
  const post = new Float64Array(total);
  let done = 0;
  await new Promise<void>((resolve) => w.on('message', ([i, postedNs]: [number, number]) => { const due = startNs + i * periodNs; post[i] = (postedNs - due) / 1e6; lag[i] = (nowNs() - due) / 1e6; store.checkFrequencyCaps({ userId: users[i % 50] as string, candidates }).then(() => { lat[i] = (nowNs() - due) / 1e6; if (++done === total) resolve(); }); }));
  await w.terminate(); obs.disconnect();
  const sorted = (a: Float64Array) => Array.from(a).sort((x, y) => x - y);
  const pct = (a: number[], p: number) => a[Math.floor((p / 100) * a.length)]?.toFixed(3);
  const sl = sorted(lat), sg = sorted(lag), sp = sorted(post);
  console.log('lat p50/p99/p999', pct(sl, 50), pct(sl, 99), pct(sl, 99.9), 'lag', pct(sg, 50), pct(sg, 99), 'workerPostLate', pct(sp, 50), pct(sp, 99), pct(sp, 99.9));
  // bad checks (> 2 ms): near a GC? worker late?
  let bad = 0, nearGc = 0, workerLate = 0;
  for (let i = 0; i < total; i++) {
    if (lat[i] <= 2) continue; bad++;
    const dueMs = perfStart + i * 0.2;
    if (post[i] > 1) workerLate++;
    if (gcs.some(([st, d]) => st < dueMs + lat[i] && st + d > dueMs - 0.5)) nearGc++;
  }
  console.log('bad', bad, 'nearGc', nearGc, 'workerLate>1ms', workerLate, 'gcs', gcs.map(([, d, k]) => `${k}:${d.toFixed(1)}`).join(' '));
  // print runs of bad
  let runs: string[] = []; for (let i = 0; i < total; i++) if (lat[i] > 2 && (i === 0 || lat[i-1] <= 2)) { let j = i; while (j < total && lat[j] > 2) j++; runs.push(`${i}+${j-i}:max${Math.max(...Array.from(lat.subarray(i,j))).toFixed(1)}:post${Math.max(...Array.from(post.subarray(i,j))).toFixed(1)}`); }
  console.log(runs.slice(0, 40).join(' '));
  client.disconnect(); await server.stop(); process.exit(0);
}
if (mode === 'timer') {
  const pct = (a: number[], p: number) => a[Math.min(a.length - 1, Math.floor((p / 100) * a.length))]?.toFixed(3);
  for (let rep = 0; rep < 3; rep++) {
    const rate = 5000, total = 10000; const lat: number[] = [];
    const gcs: string[] = [];
    const { PerformanceObserver } = await import('node:perf_hooks');
    const obs = new PerformanceObserver((l) => { for (const e of l.getEntries()) gcs.push(`${(e as unknown as {detail:{kind:number}}).detail?.kind}:${e.duration.toFixed(1)}`); });
    obs.observe({ entryTypes: ['gc'] });
    const t0 = performance.now(); let issued = 0, done = 0;
    await new Promise<void>((resolve) => {
      const tick = () => {
        const now = performance.now();
        while (issued < total && t0 + (issued * 1000) / rate <= now) {
          const due = t0 + (issued * 1000) / rate;
          store.checkFrequencyCaps({ userId: users[issued % 50] as string, candidates }).then(() => { lat.push(performance.now() - due); if (++done === total) resolve(); });
          issued++;
        }
        if (issued < total) setTimeout(tick, 1);
      };
      tick();
    });
    obs.disconnect(); lat.sort((a, b) => a - b);
    console.log(JSON.stringify({ timer: rate, p50: pct(lat, 50), p99: pct(lat, 99), p999: pct(lat, 99.9), gcs: gcs.join(' ') }));
  }
  client.disconnect(); await server.stop(); process.exit(0);
}
if (mode === 'open') {
  const { openLoop } = await import('../bench/open-loop.js');
  const pct = (a: number[], p: number) => a[Math.min(a.length - 1, Math.floor((p / 100) * a.length))]?.toFixed(3);
  await openLoop({ ratePerSec: 5000, total: 1000, run: (i) => store.checkFrequencyCaps({ userId: users[i % 50] as string, candidates }) });
  for (const rate of [5000, 5000, 5000]) {
    const e0 = performance.eventLoopUtilization(); const c0 = process.cpuUsage(); const gcs: string[] = [];
    const { PerformanceObserver } = await import('node:perf_hooks');
    const obs = new PerformanceObserver((l) => { for (const e of l.getEntries()) gcs.push(`${(e as unknown as {detail:{kind:number}}).detail?.kind}:${e.duration.toFixed(1)}`); });
    obs.observe({ entryTypes: ['gc'] });
    const r = await openLoop({ ratePerSec: rate, total: rate * 2, run: (i) => store.checkFrequencyCaps({ userId: users[i % 50] as string, candidates }) });
    obs.disconnect(); const e = performance.eventLoopUtilization(e0); const c = process.cpuUsage(c0);
    console.log('elu', e.utilization.toFixed(2), 'mainActiveUs', (e.active * 1000 / (rate * 2)).toFixed(1), 'cpuUs', ((c.user + c.system) / (rate * 2)).toFixed(1), 'gcs', gcs.join(' '));
    console.log(JSON.stringify({ rate, achieved: r.achievedPerSec, p50: pct(r.latenciesMs, 50), p99: pct(r.latenciesMs, 99), p999: pct(r.latenciesMs, 99.9), lag99: pct(r.startLagMs, 99), sched99: pct(r.fromScheduleMs, 99), genLate99: pct(r.generatorLateMs, 99) }));
  }
  client.disconnect(); await server.stop(); process.exit(0);
}
const session = new Session(); session.connect();
if (mode === 'heap') await session.post('HeapProfiler.startSampling', { samplingInterval: 512, includeObjectsCollectedByMinorGC: true, includeObjectsCollectedByMajorGC: true } as never);
if (mode === 'cpu') { await session.post('Profiler.enable'); await session.post('Profiler.start'); }
const cpu0 = process.cpuUsage(); const t0 = performance.now();
const m0 = process.memoryUsage();
let rej = 0;
await Promise.all(Array.from({ length: 4 }, async (_, w) => { for (let i = w; i < N; i += 4) rej += (await store.checkFrequencyCaps({ userId: users[i % 50] as string, candidates })).rejected.length; }));
const wall = performance.now() - t0; const c = process.cpuUsage(cpu0);
console.log(JSON.stringify({ perSec: Math.round(N / (wall / 1000)), cpuUs: ((c.user + c.system) / N).toFixed(1), rej: rej / N }));
if (mode === 'heap') { const { profile } = await session.post('HeapProfiler.stopSampling') as never as { profile: unknown }; writeFileSync('/tmp/heap.json', JSON.stringify(profile)); }
if (mode === 'cpu') { const { profile } = await session.post('Profiler.stop'); writeFileSync('/tmp/cpu.cpuprofile', JSON.stringify(profile)); }
client.disconnect(); await server.stop();
