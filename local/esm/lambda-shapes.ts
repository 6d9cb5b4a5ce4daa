/**
 * The exact payloads AWS Lambda produces for a Kinesis event-source mapping: the event the
 * function receives, the invocation context, and the record sent to an on-failure destination.
 * Handlers are typed against `@types/aws-lambda`, so the local runner builds the same objects.
 */
import type { KinesisStreamEvent, KinesisStreamRecord } from 'aws-lambda';

/** Account id the emulators report in ARNs (kinesalite and the local SSM use it too). */
export const LOCAL_ACCOUNT_ID = '000000000000';

/** A Kinesis record as read from the stream (GetRecords), before it becomes an event record. */
export interface StreamRecord {
  readonly shardId: string;
  readonly sequenceNumber: string;
  readonly partitionKey: string;
  readonly data: Uint8Array;
  /** Approximate arrival on the stream, epoch milliseconds. */
  readonly arrivalMs: number;
}

/** Lambda function ARN in the local account. */
export function functionArn(region: string, functionName: string): string {
  return `arn:aws:lambda:${region}:${LOCAL_ACCOUNT_ID}:function:${functionName}`;
}

/** One record of a `KinesisStreamEvent`, exactly as Lambda shapes it. */
export function kinesisEventRecord(
  record: StreamRecord,
  meta: { readonly region: string; readonly streamArn: string; readonly functionName: string },
): KinesisStreamRecord {
  return {
    kinesis: {
      kinesisSchemaVersion: '1.0',
      partitionKey: record.partitionKey,
      sequenceNumber: record.sequenceNumber,
      data: Buffer.from(record.data).toString('base64'),
      // Lambda sends epoch *seconds* with a fractional part.
      approximateArrivalTimestamp: record.arrivalMs / 1000,
    },
    eventSource: 'aws:kinesis',
    eventVersion: '1.0',
    eventID: `${record.shardId}:${record.sequenceNumber}`,
    eventName: 'aws:kinesis:record',
    invokeIdentityArn: `arn:aws:iam::${LOCAL_ACCOUNT_ID}:role/${meta.functionName}-role`,
    awsRegion: meta.region,
    eventSourceARN: meta.streamArn,
  };
}

/** The event of one invocation. */
export function kinesisEvent(
  records: readonly StreamRecord[],
  meta: { readonly region: string; readonly streamArn: string; readonly functionName: string },
): KinesisStreamEvent {
  return { Records: records.map((r) => kinesisEventRecord(r, meta)) };
}

/** Why Lambda gave up on a batch and sent it to the on-failure destination. */
export type OnFailureCondition = 'RetryAttemptsExhausted' | 'RecordAgeExceeded';

/**
 * The record Lambda sends to a Kinesis mapping's on-failure destination (SQS/SNS): metadata of
 * the discarded batch, not its data; the records are read back from the stream by sequence range.
 */
export interface KinesisOnFailureRecord {
  readonly requestContext: {
    readonly requestId: string;
    readonly functionArn: string;
    readonly condition: OnFailureCondition;
    /** Invocations made for these records (0 when they expired before any invoke). */
    readonly approximateInvokeCount: number;
  };
  readonly responseContext: {
    readonly statusCode: number;
    readonly executedVersion: string;
    readonly functionError: string;
  };
  readonly version: '1.0';
  /** ISO-8601 time the record was sent. */
  readonly timestamp: string;
  readonly KinesisBatchInfo: {
    readonly shardId: string;
    readonly startSequenceNumber: string;
    readonly endSequenceNumber: string;
    /** ISO-8601. */
    readonly approximateArrivalOfFirstRecord: string;
    readonly approximateArrivalOfLastRecord: string;
    readonly batchSize: number;
    readonly streamArn: string;
  };
  /**
   * Local-only extension (AWS sends no error text; it is in the function's logs): the last
   * error that made the batch fail, so a test or operator sees the reason next to the range.
   */
  readonly localErrorInfo?: { readonly errorType: string; readonly errorMessage: string };
}
