/** The Lambda `context` object handed to handlers, built the same way in a worker or in-process. */
import type { Context } from 'aws-lambda';

/** What identifies one invocation. */
export interface InvocationMeta {
  readonly functionName: string;
  readonly functionArn: string;
  readonly memoryMb: number;
  readonly awsRequestId: string;
  /** Epoch ms at which the invocation times out. */
  readonly deadlineMs: number;
}

/** A Lambda-like context; `getRemainingTimeInMillis` counts down to the deadline on the wall clock. */
export function lambdaContext(meta: InvocationMeta): Context {
  const logStream = `local/[$LATEST]${process.pid}`;
  return {
    callbackWaitsForEmptyEventLoop: true,
    functionName: meta.functionName,
    functionVersion: '$LATEST',
    invokedFunctionArn: meta.functionArn,
    memoryLimitInMB: String(meta.memoryMb),
    awsRequestId: meta.awsRequestId,
    logGroupName: `/aws/lambda/${meta.functionName}`,
    logStreamName: logStream,
    getRemainingTimeInMillis: () => Math.max(0, meta.deadlineMs - Date.now()),
    done: () => {
      throw new Error('context.done() is not supported: return a value or a promise');
    },
    fail: () => {
      throw new Error('context.fail() is not supported: throw an error');
    },
    succeed: () => {
      throw new Error('context.succeed() is not supported: return a value');
    },
  };
}
