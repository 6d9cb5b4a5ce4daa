/**
 * Entry of one function-instance process (a local Lambda execution environment). The runner
 * forks it with `--import tsx`, the handler module in `PACELINE_HANDLER_MODULE` and the
 * function's environment. Init (importing the module) runs once at start, as Lambda's init
 * phase does; an init error is reported and the process exits so the next invoke cold-starts.
 * Invocations arrive over IPC one at a time.
 */
import { pathToFileURL } from 'node:url';
import { lambdaContext } from './context.js';
import { type InvokeMessage, type WorkerMessage, workerEnv } from './protocol.js';

type Handler = (
  event: unknown,
  context: unknown,
  callback?: (err: unknown, result?: unknown) => void,
) => unknown;

function send(message: WorkerMessage): Promise<void> {
  return new Promise((resolve) => {
    if (!process.send) {
      resolve();
      return;
    }
    process.send(message, undefined, undefined, () => resolve());
  });
}

function errorFields(error: unknown): { errorType: string; errorMessage: string } {
  if (error instanceof Error) {
    return { errorType: error.constructor?.name || error.name || 'Error', errorMessage: error.message };
  }
  return { errorType: 'Error', errorMessage: String(error) };
}

async function init(): Promise<Handler | undefined> {
  const modulePath = process.env[workerEnv.handlerModule];
  const exportName = process.env[workerEnv.handlerExport] || 'handler';
  if (!modulePath) {
    await send({
      type: 'init-error',
      errorType: 'Runtime.HandlerNotFound',
      errorMessage: 'no handler module set',
    });
    return undefined;
  }
  try {
    const mod = (await import(pathToFileURL(modulePath).href)) as Record<string, unknown>;
    const handler = mod[exportName];
    if (typeof handler !== 'function') {
      await send({
        type: 'init-error',
        errorType: 'Runtime.HandlerNotFound',
        errorMessage: `${modulePath} does not export a function named '${exportName}'.`,
      });
      return undefined;
    }
    return handler as Handler;
  } catch (error) {
    const { errorMessage } = errorFields(error);
    await send({
      type: 'init-error',
      errorType: 'Runtime.ImportModuleError',
      errorMessage: `Cannot load handler module ${modulePath}: ${errorMessage}`,
    });
    return undefined;
  }
}

function call(handler: Handler, event: unknown, context: unknown): Promise<unknown> {
  if (handler.length >= 3) {
    return new Promise((resolve, reject) => {
      const maybe = handler(event, context, (err, result) => (err ? reject(err) : resolve(result)));
      if (maybe && typeof (maybe as Promise<unknown>).then === 'function')
        (maybe as Promise<unknown>).then(resolve, reject);
    });
  }
  return Promise.resolve().then(() => handler(event, context));
}

// The runner going away ends the instance: no orphaned workers (also while the handler loads).
process.on('disconnect', () => process.exit(0));
const handler = await init();
if (!handler) {
  process.exit(1);
}
const functionName = process.env.AWS_LAMBDA_FUNCTION_NAME ?? 'local-function';
const region = process.env.AWS_REGION ?? 'us-east-1';
const memoryMb = Number(process.env.AWS_LAMBDA_FUNCTION_MEMORY_SIZE ?? 128);
process.on('message', async (raw: InvokeMessage) => {
  if (raw?.type !== 'invoke') return;
  const context = lambdaContext({
    functionName,
    functionArn: `arn:aws:lambda:${region}:000000000000:function:${functionName}`,
    memoryMb,
    awsRequestId: raw.awsRequestId,
    deadlineMs: raw.deadlineMs,
  });
  try {
    const payload = await call(handler, raw.event, context);
    await send({ type: 'result', id: raw.id, payload: payload === undefined ? null : payload });
  } catch (error) {
    await send({ type: 'error', id: raw.id, ...errorFields(error) });
  }
});
await send({ type: 'ready' });
