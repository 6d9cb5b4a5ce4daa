/**
 * `npm start`: the local Paceline regions, side by side (the runtime: local/runtime.ts). For each
 * region it starts the emulators (real redis-server, dynalite, kinesalite, the local SSM
 * endpoint), provisions the region from `shared/region/resources.ts`, and runs every function.
 * Prints the endpoints (local/banner.ts) and a ready line, stays up, and on SIGINT/SIGTERM stops
 * every child process it started.
 *
 *   npm start -- [--regions us-east-1,us-west-2] [--redis standalone|cluster] [--prewarm]
 *                [--pacer-shards 4] [--pacer-instances 3] [--handler <function>=<module>]...
 *                [--data-dir DIR] [--base-port 14100] [--logs compact|full] [--state-dir .paceline]
 *                [--scheduler eventbridge|exact]
 *
 * Writes each region's client environment to `.paceline/<region>.env` (marked stale on stop),
 * each function instance's output to `.paceline/logs/<region>/<function>-<pid>.log`, and
 * supervises the emulators: one that dies is reported and restarted on the same port.
 */

import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { type LocalRegionsFile, localRegionsFile, STATE_DIR_ENV } from '../cli/paceline/target.js';
import { quietSdkNodeWarning } from '../shared/aws/clients.js';
import { errorKind } from '../shared/errors.js';
import {
  defaultRegions,
  InvalidPacerSettingsError,
  localPacerSettings,
  type PacerSettings,
  regionResources,
} from '../shared/region/resources.js';
import { describeRuntime } from './banner.js';
import { type Dashboard, startDashboard } from './dashboard/server.js';
import { PortInUseError } from './emulators/net.js';
import { RedisServerMissingError } from './emulators/redis.js';
import { onRunnerDeath } from './emulators/watchdog.js';
import {
  markEnvFileStale,
  RUNNER_PID_VAR,
  renderStaleEnvFile,
  stateFolder,
  writeEnvFile,
} from './env-file.js';
import { DEFAULT_BASE_PORT } from './region.js';
import { type RegionRuntime, type RuntimeOptions, runtimeDescription, startRuntime } from './runtime.js';
import { SCHEDULE_TIMING_MODES, type ScheduleTiming } from './scheduler.js';
import { repoRoot } from './worker/process-invoker.js';

/** Printed once everything is up; tests wait for it. */
export const READY_PREFIX = 'Paceline local regions ready';

/** First port of the stable layout `npm start` uses (see `regionPorts`); `--base-port` overrides. */
export { DEFAULT_BASE_PORT };

const CLI_FLAGS = {
  regions: { type: 'string' },
  redis: { type: 'string' },
  prewarm: { type: 'boolean' },
  'no-bundle': { type: 'boolean' },
  'pacer-shards': { type: 'string' },
  'pacer-instances': { type: 'string' },
  handler: { type: 'string', multiple: true },
  'data-dir': { type: 'string' },
  'base-port': { type: 'string' },
  logs: { type: 'string' },
  'state-dir': { type: 'string' },
  'dashboard-port': { type: 'string' },
  scheduler: { type: 'string' },
  iam: { type: 'string' },
  help: { type: 'boolean' },
} as const;

const USAGE =
  'Usage: npm start -- [--regions us-east-1,us-west-2] [--redis standalone|cluster] [--prewarm]\n' +
  `                    [--pacer-shards N] [--pacer-instances K]   (pacer layout; default ${localPacerSettings.shards} × ${localPacerSettings.instancesPerShard}, AWS 24 × 3)\n` +
  '                    [--handler <function>=<module path>]...   (run a function with another handler module)\n' +
  '                    [--no-bundle]   (compile handlers with tsx at each cold start instead of esbuild bundles)\n' +
  '                    [--data-dir DIR]   (keep state across restarts: Redis AOF, DynamoDB, Kinesis, SSM, S3; default in memory)\n' +
  `                    [--base-port N]   (stable ports: region i uses N+10i…N+10i+8; default ${DEFAULT_BASE_PORT}; 0 = free ports)\n` +
  "                    [--logs compact|full]   (console: one line per invocation (default), or every instance's output too)\n" +
  '                    [--state-dir DIR]   (env files and instance logs; default .paceline)\n' +
  '                    [--dashboard-port N]   (live dashboard; default 7400, any free port when taken; 0 = any)\n' +
  "                    [--scheduler eventbridge|exact]   (schedule timing: EventBridge's (default) or exactly on the minute)";
const USAGE_IAM =
  "                    [--iam on|off]   (check every function's and the ad-server client's calls against their synthesized IAM policies; default on)";

/** `value` if it is one of `allowed`, else a UsageError naming the flag and the choices. */
function oneOf<T extends string>(flag: string, value: string, allowed: readonly T[]): T {
  if ((allowed as readonly string[]).includes(value)) return value as T;
  throw new UsageError(`--${flag} must be ${allowed.map((m) => `'${m}'`).join(' or ')}, got '${value}'`);
}

function parseRegions(raw: string | undefined): string[] {
  const regions = (raw ?? defaultRegions.join(','))
    .split(',')
    .map((r) => r.trim())
    .filter(Boolean);
  if (regions.length === 0 || new Set(regions).size !== regions.length) {
    throw new UsageError(`--regions needs distinct region names, e.g. --regions us-east-1,us-west-2`);
  }
  return regions;
}

function parseHandlers(pairs: readonly string[]): Record<string, string> {
  const names = new Set<string>(Object.values(regionResources.functions).map((f) => f.name));
  const handlerOverrides: Record<string, string> = {};
  for (const pair of pairs) {
    const [fn, module] = pair.split('=', 2);
    if (!fn || !module || !names.has(fn)) {
      throw new UsageError(
        `--handler takes <function>=<module>, function one of ${[...names].join(', ')}; got '${pair}'`,
      );
    }
    handlerOverrides[fn] = module;
  }
  return handlerOverrides;
}

/** `--pacer-shards` / `--pacer-instances`, checked against the description's pacer limits. */
function parsePacerLayout(values: {
  'pacer-shards'?: string;
  'pacer-instances'?: string;
}): Partial<PacerSettings> {
  const pacer: { -readonly [K in keyof PacerSettings]?: PacerSettings[K] } = {};
  for (const [flag, field] of [
    ['pacer-shards', 'shards'],
    ['pacer-instances', 'instancesPerShard'],
  ] as const) {
    const raw = values[flag];
    if (raw === undefined) continue;
    const n = Number(raw);
    if (!/^\d+$/.test(raw) || !Number.isSafeInteger(n))
      throw new UsageError(`--${flag} takes a whole number, got '${raw}'`);
    pacer[field] = n;
  }
  try {
    runtimeDescription({ pacer });
  } catch (error) {
    if (error instanceof InvalidPacerSettingsError) throw new UsageError(error.message);
    throw error;
  }
  return pacer;
}

function parseBasePort(raw: string | undefined, regions: number): number {
  const basePortRaw = raw ?? String(DEFAULT_BASE_PORT);
  const basePort = Number(basePortRaw);
  const highest = basePort + 10 * (regions - 1) + 8;
  if (!/^\d+$/.test(basePortRaw) || (basePort !== 0 && (basePort < 1024 || highest + 10000 > 65535))) {
    throw new UsageError(
      `--base-port takes 0 (free ports) or a port from 1024 leaving room for ${regions} region block(s) and cluster bus ports (+10000), got '${basePortRaw}'`,
    );
  }
  return basePort;
}

function parseCli(argv: readonly string[]): CliOptions {
  const { values } = parseArgs({ args: [...argv], options: CLI_FLAGS });
  if (values.help) {
    console.log(`${USAGE}\n${USAGE_IAM}`);
    process.exit(0);
  }
  const redisMode = oneOf('redis', values.redis ?? 'standalone', ['standalone', 'cluster'] as const);
  const regions = parseRegions(values.regions);
  const handlerOverrides = parseHandlers(values.handler ?? []);
  const pacer = parsePacerLayout(values);
  const basePort = parseBasePort(values['base-port'], regions.length);
  const logsMode = oneOf('logs', values.logs ?? 'compact', ['compact', 'full'] as const);
  const timing = oneOf('scheduler', values.scheduler ?? 'eventbridge', SCHEDULE_TIMING_MODES);
  const iamMode = oneOf('iam', values.iam ?? 'on', ['on', 'off'] as const);
  const stateDir = resolve(values['state-dir'] ?? (process.env[STATE_DIR_ENV] || stateFolder(repoRoot)));
  const dashboardRaw = values['dashboard-port'];
  if (dashboardRaw !== undefined && (!/^\d+$/.test(dashboardRaw) || Number(dashboardRaw) > 65_535))
    throw new UsageError(`--dashboard-port takes a port number (0 = any free port), got '${dashboardRaw}'`);
  return {
    regions,
    redisMode,
    prewarm: values.prewarm ?? false,
    bundle: !values['no-bundle'],
    pacer,
    handlerOverrides,
    scheduler: { mode: timing as ScheduleTiming['mode'] },
    ...(values['data-dir'] ? { dataDir: resolve(values['data-dir']) } : {}),
    ...(basePort ? { basePort } : {}),
    logs: { dir: join(stateDir, 'logs'), console: logsMode },
    ...(iamMode === 'off' ? { iam: 'off' as const } : {}),
    envDir: stateDir,
    ...(dashboardRaw === undefined ? {} : { dashboardPort: Number(dashboardRaw) }),
    // Once a stop begins only its own lines print: instances it stops and emulators it shuts
    // down are not failures to report.
    log: (line) => {
      if (!stopRequested) console.log(line);
    },
    alert: (line) => {
      if (!stopRequested) console.error(line);
    },
  };
}

/** What the command line adds to the runtime's options. */
interface CliOptions extends RuntimeOptions {
  /** Folder of the `<region>.env` files. */
  readonly envDir: string;
}

/** Bad command-line arguments. */
export class UsageError extends errorKind('UsageError', 'local.usage') {}

/** Set when the runner begins to stop (see the `log` and `alert` options of parseCli). */
let stopRequested = false;

/** Writes a line to stdout; resolves once it is out (the process exits right after). */
function printLine(line: string): Promise<void> {
  return new Promise((resolve) => process.stdout.write(`${line}\n`, () => resolve()));
}

/**
 * One stop for every signal: dashboard, then each region (a line per region once it is down),
 * then exit 0; a stop that takes over 15 s kills the remaining children and exits 1.
 */
function stopper(state: { runtimes?: RegionRuntime[]; dashboard?: Dashboard }): (reason: string) => void {
  let stopping: Promise<void> | undefined;
  return (_reason) => {
    // A Ctrl-C reaches the runner twice (from the terminal, and relayed by npm): one stop.
    if (stopping) return;
    stopRequested = true;
    stopping = (async () => {
      // A child that ignores its stop request must not keep the runner (and itself) alive.
      const timer = setTimeout(() => {
        console.error('Shutdown took over 15 s; killing remaining children.');
        for (const rt of state.runtimes ?? []) {
          for (const pid of [...rt.region.redis.pids, ...[...rt.invokers.values()].flatMap((i) => i.pids)]) {
            try {
              process.kill(pid, 'SIGKILL');
            } catch {}
          }
        }
        process.exit(1);
      }, 15_000);
      await state.dashboard?.stop();
      // One line per region, once it is down (and nothing else).
      await Promise.all(
        (state.runtimes ?? []).map(async (rt) => {
          await rt.stop();
          const kept = rt.region.dataDir ? `state kept in ${rt.region.dataDir}` : 'in-memory state discarded';
          await printLine(`${rt.region.region} stopped (${kept})`);
        }),
      );
      clearTimeout(timer);
      process.exit(0);
    })();
  };
}

/** Starts the regions, or exits with one line: 2 for a missing redis-server or a taken port, else 1. */
async function startOrExit(options: CliOptions): Promise<RegionRuntime[]> {
  try {
    return await startRuntime(options);
  } catch (error) {
    if (error instanceof RedisServerMissingError) {
      console.error(error.message);
      process.exit(2);
    }
    if (error instanceof PortInUseError) {
      console.error(`Could not start the local regions: ${error.message}`);
      process.exit(2);
    }
    console.error('Could not start the local regions:', error);
    process.exit(1);
  }
}

/**
 * The client environment of each region, for `source .paceline/<region>.env`; marked stale
 * (unsets the variables, returns 1) when the runner stops, or by the watchdog when it is killed.
 */
function writeEnvFiles(runtimes: readonly RegionRuntime[], envDir: string): void {
  for (const rt of runtimes) {
    const path = writeEnvFile(envDir, rt.region.region, rt.region.clientEnv);
    console.log(`Env file ${rt.region.region}: source ${relativeToCwd(path)}`);
    // Killed without its exit handlers (kill -9, the OOM killer): the watchdog marks it stale.
    onRunnerDeath(
      path,
      `${RUNNER_PID_VAR}='${process.pid}'`,
      renderStaleEnvFile(
        rt.region.region,
        Object.keys(rt.region.clientEnv),
        `runner pid ${process.pid} ended without stopping its regions`,
      ),
    );
  }
  process.once('exit', () => {
    for (const rt of runtimes) {
      try {
        markEnvFileStale(
          envDir,
          rt.region.region,
          Object.keys(rt.region.clientEnv),
          `runner pid ${process.pid} stopped at ${new Date().toISOString()}`,
        );
      } catch {}
    }
  });
}

/** The live dashboard; the regions work without it, so a failure is one line, not a failed start. */
async function startDashboardOrSay(
  runtimes: readonly RegionRuntime[],
  port: number | undefined,
): Promise<Dashboard | undefined> {
  try {
    const dashboard = await startDashboard({
      regions: runtimes.map((rt) => ({ region: rt.region.region, env: rt.region.clientEnv })),
      ...(port === undefined ? {} : { port }),
      onError: (error) => console.error(`dashboard: ${String(error)}`),
    });
    console.log(
      `Dashboard: ${dashboard.url} (live charts of every region; docs/local-region.md "Dashboard")`,
    );
    return dashboard;
  } catch (error) {
    console.error(`Dashboard not started: ${(error as Error).message}`);
    return undefined;
  }
}

/** Lets `paceline …` find the running local regions without pasting their env. */
function writeRegionsFile(runtimes: readonly RegionRuntime[], envDir: string): void {
  const regionsFile = localRegionsFile(envDir);
  mkdirSync(dirname(regionsFile), { recursive: true });
  writeFileSync(
    regionsFile,
    JSON.stringify({
      pid: process.pid,
      regions: runtimes.map((rt) => ({ region: rt.region.region, clientEnv: rt.region.clientEnv })),
    } satisfies LocalRegionsFile),
  );
  process.once('exit', () => rmSync(regionsFile, { force: true }));
  onRunnerDeath(regionsFile, `"pid":${process.pid}`);
}

async function runCli(): Promise<void> {
  quietSdkNodeWarning();
  let options: CliOptions;
  try {
    options = parseCli(process.argv.slice(2));
  } catch (error) {
    console.error(error instanceof Error ? error.message : String(error));
    process.exit(64);
  }
  const state: { runtimes?: RegionRuntime[]; dashboard?: Dashboard } = {};
  const shutdown = stopper(state);
  let pendingSignal: string | undefined;
  const onSignal = (signal: string) => {
    if (state.runtimes) shutdown(signal);
    else pendingSignal = signal; // still starting: stop as soon as the start finishes
  };
  process.on('SIGINT', () => onSignal('SIGINT'));
  process.on('SIGTERM', () => onSignal('SIGTERM'));
  // A launcher that died without passing a signal on (tsx SIGKILLs a child that does not confirm
  // a relayed signal within 30 ms; a test's SIGKILL of `npm start`) must not leave the regions
  // running unattended: a changed parent pid means we were orphaned.
  const parent = process.ppid;
  setInterval(() => {
    if (process.ppid !== parent) onSignal('parent exited');
  }, 1_000).unref();
  const runtimes = await startOrExit(options);
  state.runtimes = runtimes;
  console.log(describeRuntime(runtimes));
  writeEnvFiles(runtimes, options.envDir);
  const dashboard = await startDashboardOrSay(runtimes, options.dashboardPort);
  if (dashboard) state.dashboard = dashboard;
  writeRegionsFile(runtimes, options.envDir);
  // performance.now() counts from process start, so this includes loading the modules.
  const seconds = (performance.now() / 1000).toFixed(1);
  console.log(
    `${READY_PREFIX}: ${options.regions.join(', ')} (started in ${seconds} s). Press Ctrl-C to stop.`,
  );
  if (pendingSignal) shutdown(pendingSignal);
}

function relativeToCwd(path: string): string {
  const rel = relative(process.cwd(), path);
  return rel.startsWith('..') ? path : rel;
}

const invokedDirectly =
  process.argv[1] !== undefined && import.meta.url === pathToFileURL(resolve(process.argv[1])).href;
if (invokedDirectly) await runCli();
