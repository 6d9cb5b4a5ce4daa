/**
 * Function instances as OS processes, the way Lambda runs execution environments: each instance
 * is a forked Node process (`worker-entry.ts` under `--import tsx`) holding one handler module,
 * serving one invocation at a time. Concurrent invocations get separate instances; an instance
 * that crashed, was killed or timed out is discarded and the next invocation cold-starts a new
 * one. PIDs are exposed so a test or an operator can SIGKILL or SIGSTOP one instance.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { isAbsolute, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { watchProcess } from '../emulators/watchdog.js';
import { failedItemsOf, type InstanceLogs, type InvocationRecord, recordsOf } from '../logs.js';
import type { InvokeFailure, InvokeResult, Invoker } from './invoker.js';
import { type InvokeMessage, type WorkerMessage, workerEnv } from './protocol.js';

/** Repository root: workers run there (Lambda's task root) so `--import tsx` resolves. */
export const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
const workerEntry = fileURLToPath(new URL('./worker-entry.ts', import.meta.url));

/** Variables passed through from the runner; everything else is the function's own. */
const PASS_THROUGH = ['PATH', 'HOME', 'TMPDIR', 'LANG', 'SYSTEMROOT'];

/** Options of {@link ProcessInvoker}. */
export interface ProcessInvokerOptions {
  readonly functionName: string;
  /** Handler module; relative paths are taken from the repository root. */
  readonly handlerModule: string;
  /** Exported handler name. @default 'handler' */
  readonly handlerExport?: string;
  /** The function's environment (e.g. `LocalRegion.functionEnv(key)`). @default {} */
  readonly env?: Readonly<Record<string, string>>;
  /** Invocation timeout; the instance is killed when it passes. @default 60_000 */
  readonly timeoutMs?: number;
  /** Init (module import) timeout; generous because `tsx` compiles on a cold start. @default 30_000 */
  readonly initTimeoutMs?: number;
  /** Reported as the context's `memoryLimitInMB`. @default 128 */
  readonly memoryMb?: number;
  /** Where instances' stdout/stderr go (unless `logs` is given). @default 'inherit' */
  readonly stdio?: 'inherit' | 'ignore';
  /** Write each instance's stdout/stderr to its own file (takes precedence over `stdio`). @default none */
  readonly logs?: InstanceLogs;
  /** Called after every invocation (the runner's compact console line). @default none */
  readonly onInvocation?: (record: InvocationRecord) => void;
  /**
   * A prebuilt JavaScript bundle of `worker-entry.ts` (local/worker/bundle.ts): instances then run
   * on plain `node`, without `tsx`, and `handlerModule` should be a bundle too. @default none (tsx)
   */
  readonly bundledWorkerEntry?: string;
}

/** What an operator sees of one instance. */
export interface InstanceInfo {
  readonly pid: number;
  readonly busy: boolean;
  readonly invocations: number;
}

interface Pending {
  resolve(result: InvokeResult): void;
  timer?: NodeJS.Timeout;
}

class Instance {
  readonly proc: ChildProcess;
  readonly pid: number;
  busy = false;
  dead = false;
  invocations = 0;
  readonly ready: Promise<InvokeFailure | undefined>;
  private pending?: Pending;
  private nextId = 1;
  private exitReason = 'exited';
  private readonly exited: Promise<void>;

  constructor(
    private readonly options: ProcessInvokerOptions,
    env: Record<string, string>,
  ) {
    this.proc = fork(options.bundledWorkerEntry ?? workerEntry, [], {
      cwd: repoRoot,
      env,
      execArgv: options.bundledWorkerEntry ? [] : ['--import', 'tsx'],
      stdio: options.logs
        ? ['ignore', 'pipe', 'pipe', 'ipc']
        : options.stdio === 'ignore'
          ? ['ignore', 'ignore', 'ignore', 'ipc']
          : ['ignore', 'inherit', 'inherit', 'ipc'],
      serialization: 'json',
      // Its own process group: a Ctrl-C in the terminal reaches the runner, which stops the
      // instances in order (no invocation cut short and reported as an error); the watchdog
      // stops them if the runner dies without doing so.
      detached: true,
    });
    watchProcess(this.proc, 'worker-entry');
    this.pid = this.proc.pid ?? -1;
    options.logs?.attach(options.functionName, this.pid, this.proc.stdout, this.proc.stderr);
    this.proc.on('error', () => {});
    this.exited = new Promise((resolve) =>
      this.proc.once('exit', (code, signal) => {
        this.dead = true;
        this.exitReason = signal ? `signal: ${signal}` : `exit status ${code}`;
        this.failPending({
          ok: false,
          errorType: 'Runtime.ExitError',
          errorMessage: `Runtime exited with error: ${this.exitReason} (pid ${this.pid})`,
          pid: this.pid,
        });
        resolve();
      }),
    );
    this.ready = new Promise((resolve) => {
      const initTimer = setTimeout(() => {
        this.kill();
        resolve(this.failure('Runtime.InitTimeout', `Init did not finish within ${this.initTimeoutMs()} ms`));
      }, this.initTimeoutMs());
      const onMessage = (message: WorkerMessage) => {
        if (message.type === 'ready') {
          clearTimeout(initTimer);
          this.proc.off('message', onMessage);
          resolve(undefined);
        } else if (message.type === 'init-error') {
          clearTimeout(initTimer);
          this.proc.off('message', onMessage);
          resolve(this.failure(message.errorType, message.errorMessage));
        }
      };
      this.proc.on('message', onMessage);
      void this.exited.then(() => {
        clearTimeout(initTimer);
        resolve(this.failure('Runtime.ExitError', `Runtime exited during init: ${this.exitReason}`));
      });
    });
    this.proc.on('message', (message: WorkerMessage) => {
      if ((message.type === 'result' || message.type === 'error') && this.pending) {
        const result: InvokeResult =
          message.type === 'result'
            ? { ok: true, payload: message.payload, pid: this.pid }
            : this.failure(message.errorType, message.errorMessage);
        this.settle(result);
      }
    });
  }

  private initTimeoutMs(): number {
    return this.options.initTimeoutMs ?? 30_000;
  }

  private failure(errorType: string, errorMessage: string): InvokeFailure {
    return { ok: false, errorType, errorMessage, pid: this.pid };
  }

  private settle(result: InvokeResult): void {
    const pending = this.pending;
    if (!pending) return;
    this.pending = undefined;
    if (pending.timer) clearTimeout(pending.timer);
    pending.resolve(result);
  }

  private failPending(result: InvokeFailure): void {
    this.settle(result);
  }

  invoke(event: unknown): Promise<InvokeResult> {
    const timeoutMs = this.options.timeoutMs ?? 60_000;
    return new Promise<InvokeResult>((resolve) => {
      if (this.dead) {
        resolve(this.failure('Runtime.ExitError', `Runtime exited with error: ${this.exitReason}`));
        return;
      }
      const id = this.nextId++;
      this.invocations++;
      this.pending = {
        resolve,
        timer: setTimeout(() => {
          // Lambda stops a timed-out environment; the next invoke gets a fresh one.
          this.settle(
            this.failure('Sandbox.Timedout', `Task timed out after ${(timeoutMs / 1000).toFixed(2)} seconds`),
          );
          this.kill();
        }, timeoutMs),
      };
      const message: InvokeMessage = {
        type: 'invoke',
        id,
        event,
        awsRequestId: randomUUID(),
        deadlineMs: Date.now() + timeoutMs,
      };
      const unreachable = (error: Error) =>
        this.settle(this.failure('Runtime.ExitError', `Could not reach instance: ${error.message}`));
      try {
        this.proc.send(message, (error) => {
          if (error) unreachable(error);
        });
      } catch (error) {
        unreachable(error as Error);
      }
    });
  }

  kill(): void {
    if (this.dead) return;
    this.dead = true;
    this.proc.kill('SIGCONT');
    this.proc.kill('SIGKILL');
  }

  /**
   * A clean stop: SIGTERM (a handler may release what it holds, e.g. the pacer's leases), then
   * SIGKILL after `graceMs` — Lambda's shutdown phase.
   */
  async stop(graceMs = 1_000): Promise<void> {
    if (this.dead) return this.exited;
    this.proc.kill('SIGCONT');
    this.proc.kill('SIGTERM');
    const timer = setTimeout(() => this.kill(), graceMs);
    await this.exited;
    clearTimeout(timer);
  }
}

/**
 * Limits how many instances initialise at once across every invoker of this runner. Many
 * instances starting together (72 pacer instances on the minute) would otherwise share the CPU so
 * thinly that every init takes tens of seconds and hits its timeout; queued, they come up one
 * after another at full speed. Lambda has no such queue, but nothing observable depends on it:
 * a queued invocation simply starts later, as a slow cold start would.
 */
class ConcurrencyGate {
  private active = 0;
  private readonly waiting: (() => void)[] = [];
  constructor(readonly limit: number) {}

  async acquire(): Promise<() => void> {
    if (this.active >= this.limit) await new Promise<void>((resolve) => this.waiting.push(resolve));
    else this.active++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiting.shift();
      if (next) next();
      else this.active--;
    };
  }
}

/** Two initialising instances per core. */
const initGate = new ConcurrencyGate(Math.max(2, availableParallelism() * 2));

/** Runs a function's instances as child processes. */
export class ProcessInvoker implements Invoker {
  readonly functionName: string;
  private readonly pool: Instance[] = [];
  private readonly env: Record<string, string>;
  private closed = false;
  /** Instances started so far (cold starts). */
  coldStarts = 0;

  private options: ProcessInvokerOptions;

  constructor(options: ProcessInvokerOptions) {
    this.options = options;
    this.functionName = options.functionName;
    const handlerModule = isAbsolute(options.handlerModule)
      ? options.handlerModule
      : resolve(repoRoot, options.handlerModule);
    const base: Record<string, string> = {};
    for (const key of PASS_THROUGH) {
      const value = process.env[key];
      if (value !== undefined) base[key] = value;
    }
    this.env = {
      ...base,
      TZ: 'UTC',
      LAMBDA_TASK_ROOT: repoRoot,
      AWS_EXECUTION_ENV: 'AWS_Lambda_nodejs22.x',
      AWS_LAMBDA_FUNCTION_NAME: options.functionName,
      AWS_LAMBDA_FUNCTION_VERSION: '$LATEST',
      AWS_LAMBDA_FUNCTION_MEMORY_SIZE: String(options.memoryMb ?? 128),
      ...options.env,
      [workerEnv.handlerModule]: handlerModule,
      [workerEnv.handlerExport]: options.handlerExport ?? 'handler',
    };
  }

  /**
   * Runs instances started from now on from bundles (local/worker/bundle.ts): plain `node`, no
   * `tsx`. Instances already running keep their code, as Lambda's warm environments do.
   */
  useBundle(bundledWorkerEntry: string, bundledHandler: string): void {
    this.options = { ...this.options, bundledWorkerEntry };
    this.env[workerEnv.handlerModule] = bundledHandler;
  }

  /** Live instances. */
  get instances(): InstanceInfo[] {
    return this.pool
      .filter((i) => !i.dead)
      .map((i) => ({ pid: i.pid, busy: i.busy, invocations: i.invocations }));
  }

  /** PIDs of live instances (SIGKILL / SIGSTOP them to simulate a crash or a freeze). */
  get pids(): number[] {
    return this.instances.map((i) => i.pid);
  }

  /** Starts `count` instances ahead of traffic (like provisioned concurrency); resolves when initialised. */
  async prewarm(count = 1): Promise<void> {
    await Promise.all(
      Array.from({ length: count }, async () => {
        const release = await initGate.acquire();
        const instance = this.spawn();
        await instance.ready.finally(release);
      }),
    );
  }

  private spawn(): Instance {
    const instance = new Instance(this.options, this.env);
    this.coldStarts++;
    this.pool.push(instance);
    return instance;
  }

  async invoke(event: unknown): Promise<InvokeResult> {
    if (!this.options.onInvocation) return this.invokeOnce(event);
    const started = performance.now();
    const result = await this.invokeOnce(event);
    this.options.onInvocation({
      functionName: this.functionName,
      pid: result.pid,
      records: recordsOf(event),
      durationMs: performance.now() - started,
      ok: result.ok,
      failedItems: result.ok ? failedItemsOf(result.payload) : 0,
      ...(result.ok ? {} : { errorType: result.errorType, errorMessage: result.errorMessage }),
    });
    return result;
  }

  /** Path of an instance's log file, when logs are kept. */
  logFile(pid: number): string | undefined {
    return this.options.logs?.file(this.functionName, pid);
  }

  private async invokeOnce(event: unknown): Promise<InvokeResult> {
    if (this.closed) return { ok: false, errorType: 'Runtime.Closed', errorMessage: 'invoker is closed' };
    this.prune();
    let instance = this.pool.find((i) => !i.busy && !i.dead);
    if (!instance) {
      // A cold start: wait for an init slot (see initGate), then take an instance that became
      // idle meanwhile or start one.
      const release = await initGate.acquire();
      if (this.closed) {
        release();
        return { ok: false, errorType: 'Runtime.Closed', errorMessage: 'invoker is closed' };
      }
      this.prune();
      instance = this.pool.find((i) => !i.busy && !i.dead);
      if (instance) release();
      else {
        instance = this.spawn();
        void instance.ready.finally(release);
      }
    }
    instance.busy = true;
    try {
      const initFailure = await instance.ready;
      if (initFailure) {
        instance.kill();
        return initFailure;
      }
      return await instance.invoke(event);
    } finally {
      instance.busy = false;
      this.prune();
    }
  }

  private prune(): void {
    for (let i = this.pool.length - 1; i >= 0; i--) if (this.pool[i]?.dead) this.pool.splice(i, 1);
  }

  async close(): Promise<void> {
    this.closed = true;
    const all = [...this.pool];
    await Promise.all(all.map((i) => i.stop()));
    this.pool.length = 0;
  }
}
