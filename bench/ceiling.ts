/**
 * The raw-Redis ceiling every benchmark reports beside its own figure (same machine, same run):
 * how many simple commands per second one Node process gets from this Redis with deep
 * pipelining. A Paceline figure divided by it says how close to the hardware we run.
 */
import { spawnSync } from 'node:child_process';
import type { Redis } from 'ioredis';

/** Ceiling measurement. */
export interface RedisCeiling {
  /** Pipelined INCRBY from this Node process (ioredis, 64-command pipelines × 8 in flight). */
  readonly redisCeilingOpsPerSec: number;
  /** redis-benchmark -P 64 -c 50 INCR, when redis-benchmark is installed (else null). */
  readonly redisBenchmarkIncrPerSec: number | null;
}

/** Measures the pipelined ceiling against `client` for about `durationMs`. */
export async function measureCeiling(client: Redis, port: number, durationMs = 1500): Promise<RedisCeiling> {
  const pipelineDepth = 64;
  const inFlight = 8;
  let ops = 0;
  const deadline = performance.now() + durationMs;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: inFlight }, async (_, worker) => {
      while (performance.now() < deadline) {
        const p = client.pipeline();
        for (let i = 0; i < pipelineDepth; i++) p.incrby(`ceiling:${worker}:${i % 16}`, 1);
        await p.exec();
        ops += pipelineDepth;
      }
    }),
  );
  const elapsed = (performance.now() - start) / 1000;
  return { redisCeilingOpsPerSec: Math.round(ops / elapsed), redisBenchmarkIncrPerSec: redisBenchmark(port) };
}

function redisBenchmark(port: number): number | null {
  const out = spawnSync(
    'redis-benchmark',
    ['-p', String(port), '-P', '64', '-c', '50', '-n', '400000', '-t', 'incr', '--csv', '-q'],
    { encoding: 'utf8', timeout: 60_000 },
  );
  if (out.status !== 0 || !out.stdout) return null;
  // CSV: "test","rps",... ; the line for INCR holds the requests per second.
  const line = out.stdout.split('\n').find((l) => l.startsWith('"INCR"'));
  const rps = line ? Number(line.split(',')[1]?.replaceAll('"', '')) : Number.NaN;
  return Number.isFinite(rps) ? Math.round(rps) : null;
}
