/** Runs a child process to completion (CLIs, examples, npm) and collects its exit code and output. */
import { execFile } from 'node:child_process';

/** What a finished child process left. */
export interface ChildResult {
  /** Exit code (1 when it was killed or could not start). */
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs `command args` in `cwd` with exactly `env`; never rejects. */
export function runChild(
  command: string,
  args: readonly string[],
  options: {
    readonly cwd: string;
    readonly env: Readonly<Record<string, string | undefined>>;
    readonly timeoutMs?: number;
  },
): Promise<ChildResult> {
  return new Promise((resolve) => {
    execFile(
      command,
      [...args],
      { cwd: options.cwd, env: options.env, timeout: options.timeoutMs ?? 120_000, maxBuffer: 16 << 20 },
      (error, stdout, stderr) => {
        const code = (error as { code?: unknown } | null)?.code;
        resolve({ code: error ? (typeof code === 'number' ? code : 1) : 0, stdout, stderr });
      },
    );
  });
}
