/**
 * Calls a handler in the runner's own process: no isolation, no kill on timeout (the call is
 * abandoned), but fast. For tests of event-source semantics where process boundaries do not matter.
 */
import { randomUUID } from 'node:crypto';
import type { Context } from 'aws-lambda';
import { lambdaContext } from './context.js';
import { describeError, type InvokeResult, type Invoker } from './invoker.js';

/** A handler as Lambda calls it. */
export type LocalHandler = (event: never, context: Context) => unknown;

/** Options of {@link InProcessInvoker}. */
export interface InProcessInvokerOptions {
  readonly functionName: string;
  readonly handler: LocalHandler;
  /** @default 60_000 */
  readonly timeoutMs?: number;
  /** @default 'us-east-1' */
  readonly region?: string;
}

/** Invokes a handler function directly. */
export class InProcessInvoker implements Invoker {
  readonly functionName: string;
  private closed = false;

  constructor(private readonly options: InProcessInvokerOptions) {
    this.functionName = options.functionName;
  }

  async invoke(event: unknown): Promise<InvokeResult> {
    if (this.closed) return { ok: false, errorType: 'Runtime.Closed', errorMessage: 'invoker is closed' };
    const timeoutMs = this.options.timeoutMs ?? 60_000;
    const context = lambdaContext({
      functionName: this.functionName,
      functionArn: `arn:aws:lambda:${this.options.region ?? 'us-east-1'}:000000000000:function:${this.functionName}`,
      memoryMb: 128,
      awsRequestId: randomUUID(),
      deadlineMs: Date.now() + timeoutMs,
    });
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<InvokeResult>((resolve) => {
      timer = setTimeout(
        () =>
          resolve({
            ok: false,
            errorType: 'Sandbox.Timedout',
            errorMessage: `Task timed out after ${(timeoutMs / 1000).toFixed(2)} seconds`,
          }),
        timeoutMs,
      );
    });
    const run = (async (): Promise<InvokeResult> => {
      try {
        const payload = await this.options.handler(event as never, context);
        // Round-trip through JSON as Lambda does: a handler's return value is serialised.
        return { ok: true, payload: payload === undefined ? null : JSON.parse(JSON.stringify(payload)) };
      } catch (error) {
        return { ok: false, ...describeError(error) };
      }
    })();
    try {
      return await Promise.race([run, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
  }
}
