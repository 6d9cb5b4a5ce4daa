/**
 * The runner's wiring (startRuntime, as `npm start` uses it): a region's stream feeds its
 * function through the poller into a worker process with the function's environment, and a
 * function whose handler module does not exist fails at invoke time — the runner stays up and
 * the records land in `.local/<region>/on-failure/<function>.jsonl` with the reason.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KinesisOnFailureRecord } from '../../../local/esm/lambda-shapes.js';
import { type RegionRuntime, startRuntime } from '../../../local/runtime.js';
import { putRecords } from './support.js';

let runtime: RegionRuntime;
let stateDir: string;

beforeAll(async () => {
  stateDir = mkdtempSync(join(tmpdir(), 'paceline-runtime-'));
  const [rt] = await startRuntime({
    regions: ['us-west-2'],
    redisMode: 'standalone',
    stateDir,
    functions: ['ingestActions', 'trackSpend'],
    handlerOverrides: {
      'ingest-actions': 'test/fixtures/handlers/echo.ts',
      'track-spend': 'functions/not-written-yet/handler.ts',
    },
  });
  runtime = rt as RegionRuntime;
});
afterAll(async () => {
  await runtime?.stop();
  rmSync(stateDir, { recursive: true, force: true });
});

describe('startRuntime', () => {
  it('delivers a record from the region stream to its function instance', async () => {
    const poller = runtime.pollers.get('ingestActions');
    const invoker = runtime.invokers.get('ingestActions');
    await putRecords(runtime.region.kinesis, runtime.region.streamName('actions'), [
      { data: 'click', partitionKey: 'u1' },
    ]);
    await poller?.waitForIdle();
    expect(poller?.history.map((h) => [h.outcome, h.size])).toEqual([['success', 1]]);
    expect(poller?.eventSourceArn).toContain(':us-west-2:');
    expect(invoker?.pids.length).toBe(1);
  });

  it('a missing handler module is an invoke-time error; the records go to the on-failure file', async () => {
    const poller = runtime.pollers.get('trackSpend');
    const [put] = await putRecords(runtime.region.kinesis, runtime.region.streamName('spend'), [
      { data: 'win', partitionKey: 'bid-1' },
    ]);
    await poller?.waitForIdle(30_000);
    const file = join(stateDir, 'us-west-2', 'on-failure', 'track-spend.jsonl');
    const lines = readFileSync(file, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as KinesisOnFailureRecord);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      requestContext: { condition: 'RetryAttemptsExhausted', approximateInvokeCount: 6 },
      KinesisBatchInfo: { startSequenceNumber: put?.sequenceNumber, batchSize: 1 },
      localErrorInfo: { errorType: 'Runtime.ImportModuleError' },
    });
    expect(lines[0]?.localErrorInfo?.errorMessage).toContain('functions/not-written-yet/handler.ts');
    expect(runtime.onFailure.get('trackSpend')?.records).toEqual(lines);
  });
});
