/**
 * The client environment of a running local region, as a file a shell sources:
 * `.paceline/<region>.env` (git-ignored). `npm start` writes one per region when the region is
 * ready and, when it stops, replaces it with a stale marker that unsets the variables, says the
 * region is not running and returns 1, so a script sourcing it fails instead of talking to
 * ports nobody (or somebody else) listens on.
 */
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** Folder of the env files and logs: `<repo>/.paceline`. */
export function stateFolder(repoRoot: string): string {
  return join(repoRoot, '.paceline');
}

/** Path of a region's env file. */
export function envFilePath(folder: string, region: string): string {
  return join(folder, `${region}.env`);
}

/** Variable set by a live env file: the runner's pid (tools check that it still runs). */
export const RUNNER_PID_VAR = 'PACELINE_LOCAL_PID';

/** Marker line of a stale env file. */
export const STALE_MARKER = '# paceline: stale';

function quote(value: string): string {
  return `'${value.replaceAll("'", `'\\''`)}'`;
}

/** The sourceable text of a live env file (`export NAME='value'` lines, sorted). */
export function renderEnvFile(region: string, env: Readonly<Record<string, string>>, pid: number): string {
  const lines = [
    `# Paceline local region ${region}: written by \`npm start\` (pid ${pid}) at ${new Date().toISOString()}.`,
    `# Use: source ${join('.paceline', `${region}.env`)}   (points the AWS SDK/CLI, Redis clients and the paceline CLI at it)`,
    // The runner gone without rewriting this file (the machine restarted, the runner and its
    // watchdog both killed): refuse, as the stale marker would.
    `kill -0 ${pid} 2>/dev/null || { echo "paceline: the local region ${region} is not running (runner pid ${pid} is gone); start it with npm start" >&2; return 1 2>/dev/null || exit 1; }`,
    ...Object.entries({ ...env, [RUNNER_PID_VAR]: String(pid) })
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([k, v]) => `export ${k}=${quote(v)}`),
  ];
  return `${lines.join('\n')}\n`;
}

/** The stale marker that replaces a live env file when its runner stops. */
export function renderStaleEnvFile(region: string, names: readonly string[], reason: string): string {
  return [
    STALE_MARKER,
    `# The local region ${region} is not running (${reason}). Start it with: npm start`,
    `unset ${[...names, RUNNER_PID_VAR].join(' ')}`,
    `echo "paceline: the local region ${region} is not running (${reason}); start it with npm start" >&2`,
    'return 1 2>/dev/null || true',
    '',
  ].join('\n');
}

/** Writes a file whole through a rename (a reader never sees half of it). */
function writeAtomically(path: string, text: string): void {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(`${path}.tmp`, text);
  renameSync(`${path}.tmp`, path);
}

/** Writes a region's live env file; returns its path. */
export function writeEnvFile(folder: string, region: string, env: Readonly<Record<string, string>>): string {
  const path = envFilePath(folder, region);
  writeAtomically(path, renderEnvFile(region, env, process.pid));
  return path;
}

/** Replaces a region's env file with the stale marker. */
export function markEnvFileStale(
  folder: string,
  region: string,
  names: readonly string[],
  reason: string,
): void {
  writeAtomically(envFilePath(folder, region), renderStaleEnvFile(region, names, reason));
}

/**
 * Reads a live env file's variables without a shell (tools, tests); throws a clear error for a
 * stale or missing file.
 */
export function readEnvFile(path: string): Record<string, string> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    throw new Error(`${path} does not exist: start the local regions with npm start`);
  }
  if (text.startsWith(STALE_MARKER))
    throw new Error(`${path} is stale: its local region is not running (npm start)`);
  const env: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const m = /^export ([A-Za-z_][A-Za-z0-9_]*)='(.*)'$/.exec(line);
    if (m) env[m[1] as string] = (m[2] as string).replaceAll(`'\\''`, "'");
  }
  return env;
}
