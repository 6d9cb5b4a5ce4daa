/**
 * Lambda-shaped inputs for invoking handlers in-process in tests, built by the same functions the
 * local runtime uses (local/esm/lambda-shapes.ts, local/worker/context.ts), so tests and the
 * runner cannot disagree on what Lambda sends.
 */
import { fileURLToPath } from 'node:url';
import type {
  Context,
  KinesisStreamBatchResponse,
  KinesisStreamEvent,
  KinesisStreamRecord,
} from 'aws-lambda';
import { kinesisEventRecord } from '../../local/esm/lambda-shapes.js';
import type { LocalRegion } from '../../local/region.js';
import { lambdaContext } from '../../local/worker/context.js';
import { type FunctionKey, regionResources } from '../../shared/region/resources.js';

/** A Kinesis-triggered handler as the functions export it. */
export type KinesisHandler = (
  event: KinesisStreamEvent,
  context: Context,
) => Promise<KinesisStreamBatchResponse>;

/**
 * Loads a function's real handler module into this process with a local region's environment,
 * as a cold start would (the module reads its configuration at load). Metrics are off and logs
 * quiet unless `metrics` is set: tests assert on stores, not on log output (except the test of
 * the metrics themselves, which reads the EMF lines).
 */
export async function loadKinesisHandler(
  region: LocalRegion,
  key: FunctionKey,
  options: { readonly metrics?: boolean } = {},
): Promise<KinesisHandler> {
  return loadHandler<KinesisHandler>(region, key, {}, options);
}

/**
 * Loads any function's real handler module like {@link loadKinesisHandler}; `overrides` replace
 * settings of its environment (e.g. a shorter sweep grace) before the module reads them.
 */
export async function loadHandler<H>(
  region: LocalRegion,
  key: FunctionKey,
  overrides: Readonly<Record<string, string>> = {},
  options: { readonly metrics?: boolean } = {},
): Promise<H> {
  Object.assign(process.env, region.functionEnv(key), overrides, {
    POWERTOOLS_METRICS_DISABLED: options.metrics ? 'false' : 'true',
    POWERTOOLS_LOG_LEVEL: 'SILENT',
  });
  const entry = fileURLToPath(new URL(`../../${regionResources.functions[key].entry}`, import.meta.url));
  const module = (await import(entry)) as { handler: H };
  return module.handler;
}

let sequence = 1_000_000;

/** Options of {@link testKinesisRecord}. */
export interface TestRecordOptions {
  /** @default 'pk' */
  readonly partitionKey?: string;
  /** @default 'shardId-000000000000' */
  readonly shardId?: string;
  /** @default the next number of a process-wide counter */
  readonly sequenceNumber?: string;
  /** Arrival on the stream, epoch ms. @default Date.now() */
  readonly arrivalMs?: number;
  /** @default 'test-fn' */
  readonly functionName?: string;
}

/** One Kinesis event record carrying `data`, as Lambda shapes it. */
export function testKinesisRecord(data: Uint8Array, options: TestRecordOptions = {}): KinesisStreamRecord {
  sequence += 1;
  const functionName = options.functionName ?? 'test-fn';
  return kinesisEventRecord(
    {
      shardId: options.shardId ?? 'shardId-000000000000',
      sequenceNumber: options.sequenceNumber ?? String(sequence),
      partitionKey: options.partitionKey ?? 'pk',
      data,
      arrivalMs: options.arrivalMs ?? Date.now(),
    },
    { region: 'us-east-1', streamArn: 'arn:aws:kinesis:us-east-1:000000000000:stream/test', functionName },
  );
}

/** A Lambda context for an in-process invocation (15 minutes to its deadline). */
export function testContext(functionName = 'test-fn'): Context {
  return lambdaContext({
    functionName,
    functionArn: `arn:aws:lambda:us-east-1:000000000000:function:${functionName}`,
    memoryMb: 1024,
    awsRequestId: `test-${functionName}`,
    deadlineMs: Date.now() + 15 * 60_000,
  });
}
