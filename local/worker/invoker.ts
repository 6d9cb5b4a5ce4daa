/**
 * How the local runner calls a function. One interface, two implementations: a process per
 * function instance (`ProcessInvoker`, what Lambda's execution environments are) and an
 * in-process call for fast tests (`InProcessInvoker`).
 */

/** Why an invocation counts as a function error (Lambda's `FunctionError` + error type). */
export interface InvokeFailure {
  readonly ok: false;
  /** e.g. `Error` (thrown), `Sandbox.Timedout`, `Runtime.ExitError`, `Runtime.ImportModuleError`. */
  readonly errorType: string;
  readonly errorMessage: string;
  /** PID of the instance that failed (process invoker only). */
  readonly pid?: number;
}

/** A successful invocation and the handler's return value. */
export interface InvokeSuccess {
  readonly ok: true;
  readonly payload: unknown;
  readonly pid?: number;
}

export type InvokeResult = InvokeSuccess | InvokeFailure;

/** Calls one function. Implementations never throw for a function error: they return it. */
export interface Invoker {
  readonly functionName: string;
  invoke(event: unknown): Promise<InvokeResult>;
  /** Ends every instance; pending invocations resolve as failures. */
  close(): Promise<void>;
}

/** Error text of anything thrown, in Lambda's `errorType`/`errorMessage` form. */
export function describeError(error: unknown): { errorType: string; errorMessage: string } {
  if (error instanceof Error) return { errorType: error.name || 'Error', errorMessage: error.message };
  return { errorType: 'Error', errorMessage: String(error) };
}
