/**
 * Crash cleanup for the processes and files a runner leaves behind when it cannot clean up
 * itself (`kill -9`, the OOM killer): one small watchdog process per runner
 * (`watchdog-process.mjs`), whose stdin is a pipe from this process. The kernel closes the pipe
 * when this process ends, however it ends; the watchdog then stops every process registered with
 * {@link watchProcess} (redis-server and function instances — children that are not in the
 * terminal's process group, so Ctrl-C reaches only the runner) and applies the file actions
 * registered with {@link onRunnerDeath} (env files marked stale, regions.json removed). A runner
 * that stops normally unregisters its processes as they exit, and its own exit handlers write the
 * same files; the watchdog's file actions only apply while a file still carries the dead runner's
 * mark.
 *
 * The watchdog starts lazily, with the first registration, and never keeps this process alive.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const script = fileURLToPath(new URL('./watchdog-process.mjs', import.meta.url));
let child: ChildProcess | undefined;

function send(message: Record<string, unknown>): void {
  // Inside an esbuild bundle (the simulator's process) the script is not beside this module:
  // such one-shot tools kill their servers on a signal instead (killServersOnSignal).
  if (!child && !existsSync(script)) return;
  if (!child) {
    child = spawn(process.execPath, [script, String(process.pid)], {
      stdio: ['pipe', 'ignore', 'ignore'],
      // Its own process group: a Ctrl-C to the terminal is the runner's to handle.
      detached: true,
    });
    child.on('error', () => {});
    child.stdin?.on('error', () => {});
    child.unref();
    (child.stdin as unknown as { unref?: () => void } | null)?.unref?.();
  }
  child.stdin?.write(`${JSON.stringify(message)}\n`);
}

/** The watchdog's pid, once started (tests). */
export function watchdogPid(): number | undefined {
  return child?.pid;
}

/**
 * Stops `proc` (SIGTERM, SIGKILL after 2 s) if this process dies without stopping it; `match` is
 * a string of its command line (a reused pid is left alone). Unregisters itself when `proc` exits.
 */
export function watchProcess(proc: ChildProcess, match: string): void {
  const pid = proc.pid;
  if (pid === undefined) return;
  send({ watch: pid, match });
  proc.once('exit', () => send({ unwatch: pid }));
}

/**
 * When this process dies without its own exit handlers running: replace the file at `path` with
 * `text` (or delete it when `text` is undefined), if the file still contains `owner`.
 */
export function onRunnerDeath(path: string, owner: string, text?: string): void {
  send(text === undefined ? { remove: path, owner } : { write: path, text, owner });
}
