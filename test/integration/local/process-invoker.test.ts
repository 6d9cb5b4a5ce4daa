/**
 * Function instances as OS processes: context and environment, timeouts that kill the
 * instance, crashes (SIGKILL, SIGSTOP) that lead to a cold start, init errors reported at invoke.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ProcessInvoker } from '../../../local/worker/process-invoker.js';
import { functionEnvironment, regionResources } from '../../../shared/region/resources.js';

const invokers: ProcessInvoker[] = [];
afterEach(async () => {
  await Promise.all(invokers.splice(0).map((i) => i.close()));
});

function echoInvoker(timeoutMs = 10_000): ProcessInvoker {
  const invoker = new ProcessInvoker({
    functionName: 'echo-fn',
    handlerModule: 'test/fixtures/handlers/echo.ts',
    env: { GREETING: 'hi' },
    timeoutMs,
    memoryMb: 256,
    stdio: 'ignore',
  });
  invokers.push(invoker);
  return invoker;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function waitUntil(check: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('ProcessInvoker', () => {
  it('runs the handler in its own process with a Lambda context and only the function environment', async () => {
    process.env.PACELINE_TEST_RUNNER_ONLY = 'leak?';
    const invoker = echoInvoker();
    const a = await invoker.invoke({ n: 1 });
    const b = await invoker.invoke({ n: 2 });
    delete process.env.PACELINE_TEST_RUNNER_ONLY;
    expect(a.ok && b.ok).toBe(true);
    if (!a.ok || !b.ok) return;
    const first = a.payload as Record<string, unknown>;
    const second = b.payload as Record<string, unknown>;
    expect(first).toMatchObject({
      event: { n: 1 },
      functionName: 'echo-fn',
      memoryLimitInMB: '256',
      invokedFunctionArn: 'arn:aws:lambda:us-east-1:000000000000:function:echo-fn',
      greeting: 'hi',
      leakedRunnerVar: null,
    });
    expect(first.pid).not.toBe(process.pid);
    expect(second.pid).toBe(first.pid); // warm instance reused
    expect(first.awsRequestId).not.toBe(second.awsRequestId);
    expect(first.remainingMs).toBeGreaterThan(0);
    expect(first.remainingMs).toBeLessThanOrEqual(10_000);
    expect(invoker.coldStarts).toBe(1);
  });

  it("starts instances with the function's Node flags from its environment (the pacer's young generation)", async () => {
    const env = functionEnvironment(regionResources.functions.pacer, {
      region: 'us-east-1',
      tableName: (k) => `T-${k}`,
      streamName: (k) => `S-${k}`,
      bucketName: (k) => `B-${k}`,
      redis: { nodes: '127.0.0.1:6379', mode: 'standalone', tls: false },
    });
    const young = async (nodeOptions: string | undefined) => {
      const invoker = new ProcessInvoker({
        functionName: 'echo-fn',
        handlerModule: 'test/fixtures/handlers/echo.ts',
        env: nodeOptions === undefined ? {} : { NODE_OPTIONS: nodeOptions },
        timeoutMs: 60_000,
        stdio: 'ignore',
      });
      invokers.push(invoker);
      const r = await invoker.invoke({ youngGeneration: true });
      if (!r.ok) throw new Error(r.errorMessage);
      return (r.payload as { newSpaceMaxMb: number }).newSpaceMaxMb;
    };
    expect(env.NODE_OPTIONS).toBeDefined();
    // Node's default semi-spaces (16 MB) keep the new space at 32 MB at most; the pacer's, 128 MB.
    expect(await young(undefined)).toBeLessThanOrEqual(32);
    expect(await young(env.NODE_OPTIONS)).toBeGreaterThan(64);
  }, 120_000);

  it('concurrent invocations get separate instances', async () => {
    const invoker = echoInvoker();
    const results = await Promise.all([invoker.invoke({ sleepMs: 300 }), invoker.invoke({ sleepMs: 300 })]);
    const pids = results.map((r) => (r.ok ? (r.payload as { pid: number }).pid : -1));
    expect(new Set(pids).size).toBe(2);
    expect(invoker.instances).toHaveLength(2);
  });

  it('a thrown error is a function error; the instance stays warm', async () => {
    const invoker = echoInvoker();
    const failed = await invoker.invoke({ throwMessage: 'bad input' });
    expect(failed).toMatchObject({ ok: false, errorType: 'TypeError', errorMessage: 'bad input' });
    const ok = await invoker.invoke({});
    expect(ok.ok).toBe(true);
    expect(invoker.coldStarts).toBe(1);
  });

  it('a timeout kills the instance and reports Sandbox.Timedout; the next invoke cold-starts', async () => {
    const invoker = echoInvoker(1500);
    await invoker.prewarm();
    const [pid] = invoker.pids;
    const result = await invoker.invoke({ sleepMs: 5000 });
    expect(result).toMatchObject({ ok: false, errorType: 'Sandbox.Timedout', pid });
    await waitUntil(() => !alive(pid as number));
    const next = await invoker.invoke({});
    expect(next.ok && (next.payload as { pid: number }).pid).not.toBe(pid);
    expect(invoker.coldStarts).toBe(2);
  });

  it('SIGKILL of a busy instance is a function error and the next invoke gets a fresh process', async () => {
    const invoker = echoInvoker();
    await invoker.prewarm();
    const [pid] = invoker.pids as [number];
    const pending = invoker.invoke({ sleepMs: 5000 });
    await new Promise((r) => setTimeout(r, 200));
    process.kill(pid, 'SIGKILL');
    expect(await pending).toMatchObject({ ok: false, errorType: 'Runtime.ExitError', pid });
    const next = await invoker.invoke({});
    expect(next.ok && (next.payload as { pid: number }).pid).not.toBe(pid);
  });

  it('a SIGSTOPped (frozen) instance times out, is killed, and is replaced', async () => {
    const invoker = echoInvoker(1000);
    await invoker.prewarm();
    const [pid] = invoker.pids as [number];
    process.kill(pid, 'SIGSTOP');
    expect(await invoker.invoke({})).toMatchObject({ ok: false, errorType: 'Sandbox.Timedout' });
    await waitUntil(() => !alive(pid));
    expect((await invoker.invoke({})).ok).toBe(true);
  });

  it('a process exit during an invocation is reported with its status', async () => {
    const invoker = echoInvoker();
    const result = await invoker.invoke({ exitCode: 3 });
    expect(result).toMatchObject({ ok: false, errorType: 'Runtime.ExitError' });
    expect(!result.ok && result.errorMessage).toContain('exit status 3');
  });

  it('a missing or failing handler module is an error at invoke time, not a crash of the runner', async () => {
    for (const [handlerModule, expected] of [
      [
        'functions/does-not-exist/handler.ts',
        /Cannot load handler module .*functions\/does-not-exist\/handler\.ts/,
      ],
      ['test/fixtures/handlers/broken-import.ts', /configuration missing: BROKEN_IMPORT_FIXTURE_OK/],
    ] as const) {
      const invoker = new ProcessInvoker({ functionName: 'broken', handlerModule, stdio: 'ignore' });
      invokers.push(invoker);
      const result = await invoker.invoke({});
      expect(result).toMatchObject({ ok: false, errorType: 'Runtime.ImportModuleError' });
      expect(!result.ok && result.errorMessage).toMatch(expected);
      // Retried init on the next invoke (so a handler that appears later is picked up).
      expect((await invoker.invoke({})).ok).toBe(false);
      expect(invoker.coldStarts).toBe(2);
    }
  });

  it('close() ends every instance, including a stopped one', async () => {
    const invoker = echoInvoker();
    await invoker.prewarm(2);
    const pids = invoker.pids;
    expect(pids).toHaveLength(2);
    process.kill(pids[0] as number, 'SIGSTOP');
    await invoker.close();
    for (const pid of pids) expect(alive(pid)).toBe(false);
  });
});
