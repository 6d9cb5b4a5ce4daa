/** Polling waits for integration tests (real processes and servers: no fake timers). */

/**
 * Calls `probe` every `intervalMs` until it returns something other than undefined; throws
 * `timed out waiting for <what>` after `timeoutMs`.
 */
export async function waitFor<T>(
  what: string,
  timeoutMs: number,
  probe: () => Promise<T | undefined> | T | undefined,
  intervalMs = 100,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
