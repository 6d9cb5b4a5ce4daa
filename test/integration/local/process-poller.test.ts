/**
 * The poller with real per-process function instances: killing an instance (kill -9) in the
 * middle of a batch is a function error; the batch is retried in a fresh process and no record
 * is lost or reordered.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalOnFailureDestination } from '../../../local/esm/on-failure.js';
import { KinesisPoller } from '../../../local/esm/poller.js';
import { ProcessInvoker } from '../../../local/worker/process-invoker.js';
import { createStream, type KinesisFixture, putRecords, startKinesis, testSource } from './support.js';

let k: KinesisFixture;
let dir: string;
beforeAll(async () => {
  k = await startKinesis();
  dir = mkdtempSync(join(tmpdir(), 'paceline-process-poller-'));
});
afterAll(async () => {
  await k.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('KinesisPoller + ProcessInvoker', () => {
  it('kill -9 of an instance mid-batch: retried in a fresh process, nothing lost', async () => {
    const stream = await createStream(k.kinesis, 1);
    const recordFile = join(dir, 'records.jsonl');
    const hangMarker = join(dir, 'hang.pid');
    const invoker = new ProcessInvoker({
      functionName: 'recorder',
      handlerModule: 'test/fixtures/handlers/process-recorder.ts',
      env: { RECORD_FILE: recordFile, HANG_MARKER: hangMarker },
      timeoutMs: 30_000,
      stdio: 'ignore',
    });
    const onFailure = new LocalOnFailureDestination();
    const poller = new KinesisPoller({
      kinesis: k.kinesis,
      streamName: stream,
      source: { ...testSource, batchSize: 20, bisectBatchOnFunctionError: true },
      invoker,
      onFailure,
      idlePollMs: 20,
      retryBaseDelayMs: 10,
    });
    try {
      await poller.start();
      const data = Array.from({ length: 50 }, (_, i) => `v${i}`);
      await putRecords(
        k.kinesis,
        stream,
        data.map((d) => ({ data: d, partitionKey: 'one-key' })),
      );
      const deadline = Date.now() + 20_000;
      while (!existsSync(hangMarker) || readFileSync(hangMarker, 'utf8') === '') {
        if (Date.now() > deadline) throw new Error('the first invocation never started');
        await new Promise((r) => setTimeout(r, 20));
      }
      const killedPid = Number(readFileSync(hangMarker, 'utf8'));
      expect(invoker.pids).toContain(killedPid);
      process.kill(killedPid, 'SIGKILL');
      await poller.waitForIdle(30_000);
      const lines = readFileSync(recordFile, 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { pid: number; data: string[] });
      expect(lines.flatMap((l) => l.data)).toEqual(data); // all, once, in order
      expect(lines.every((l) => l.pid !== killedPid)).toBe(true);
      expect(onFailure.records).toEqual([]);
      expect(poller.history[0]).toMatchObject({ outcome: 'error', size: 20 });
      expect(poller.history[0]?.detail).toMatch(/Runtime\.ExitError.*SIGKILL/);
      expect(invoker.coldStarts).toBe(2);
    } finally {
      await Promise.all([poller.stop(), invoker.close()]);
    }
  });
});
