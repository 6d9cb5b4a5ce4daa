/** IPC messages between the runner and a function-instance process (`worker-entry.ts`). */

/** Runner → worker: run one invocation. */
export interface InvokeMessage {
  readonly type: 'invoke';
  readonly id: number;
  readonly event: unknown;
  readonly awsRequestId: string;
  readonly deadlineMs: number;
}

/** Worker → runner. */
export type WorkerMessage =
  | { readonly type: 'ready' }
  | { readonly type: 'init-error'; readonly errorType: string; readonly errorMessage: string }
  | { readonly type: 'result'; readonly id: number; readonly payload: unknown }
  | {
      readonly type: 'error';
      readonly id: number;
      readonly errorType: string;
      readonly errorMessage: string;
    };

/** Environment variables the runner sets for the worker (besides the function's own). */
export const workerEnv = {
  handlerModule: 'PACELINE_HANDLER_MODULE',
  handlerExport: 'PACELINE_HANDLER_EXPORT',
} as const;
