/**
 * `npm start`: the local Paceline regions, side by side. For each region it starts the emulators
 * (real redis-server, dynalite, kinesalite, the local SSM endpoint), provisions the region from
 * `shared/region/resources.ts`, and runs every function: a Kinesis event-source mapping per
 * function with a `source`, the EventBridge scheduler for functions with a `schedule`, each
 * function instance in its own process. Prints the endpoints and a ready line, stays up, and on
 * SIGINT/SIGTERM stops every child process it started.
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

import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { type LocalRegionsFile, localRegionsFile, STATE_DIR_ENV } from '../cli/paceline/target.js';
import {
  kinesisClient,
  quietSdkNodeWarning,
  REGION_ENDPOINTS_ENV,
  REGIONS_ENV,
} from '../shared/aws/clients.js';
import { PacelineError } from '../shared/errors.js';
import {
  defaultRegions,
  type FunctionKey,
  type FunctionSpec,
  InvalidPacerSettingsError,
  localPacerSettings,
  type PacerSettings,
  physicalName,
  type RegionDescription,
  regionDescription,
  regionResources,
} from '../shared/region/resources.js';
import { type Dashboard, startDashboard } from './dashboard/server.js';
import { PortInUseError } from './emulators/net.js';
import { RedisServerMissingError } from './emulators/redis.js';
import { formatSupervisionEvent, type SupervisionEvent } from './emulators/supervision.js';
import { onRunnerDeath } from './emulators/watchdog.js';
import {
  markEnvFileStale,
  RUNNER_PID_VAR,
  renderStaleEnvFile,
  stateFolder,
  writeEnvFile,
} from './env-file.js';
import { type CheckpointStore, FileCheckpointStore } from './esm/checkpoints.js';
import { LocalOnFailureDestination } from './esm/on-failure.js';
import { KinesisPoller } from './esm/poller.js';
import { GlobalTablesStandIn } from './global-tables.js';
import type { LocalIam, Refusal } from './iam/gate.js';
import { type LocalPolicySet, principalCredentials } from './iam/policy.js';
import { type ConsoleLogMode, formatInvocation, InstanceLogs } from './logs.js';
import { DEFAULT_BASE_PORT, type LocalRegion, localIam, regionPorts, startLocalRegion } from './region.js';
import {
  SCHEDULE_TIMING_MODES,
  Scheduler,
  type ScheduleTarget,
  type ScheduleTiming,
  scheduleTargets,
} from './scheduler.js';
import { bundleModule } from './worker/bundle.js';
import { ProcessInvoker, repoRoot } from './worker/process-invoker.js';

/** Printed once everything is up; tests wait for it. */
export const READY_PREFIX = 'Paceline local regions ready';

/** First port of the stable layout `npm start` uses (see `regionPorts`); `--base-port` overrides. */
export { DEFAULT_BASE_PORT };

/** Options of {@link startRuntime}. */
export interface RuntimeOptions {
  readonly regions: readonly string[];
  readonly redisMode: 'standalone' | 'cluster';
  /** Start one instance per function up front (like provisioned concurrency). @default false */
  readonly prewarm?: boolean;
  /**
   * Handler module per function name, replacing the spec's `entry` (e.g. a stub while a handler
   * is being written). @default {}
   */
  readonly handlerOverrides?: Readonly<Record<string, string>>;
  /** Directory of local state (on-failure records). @default `<repo>/.local` */
  readonly stateDir?: string;
  /**
   * Pacer layout and cadence (shards, instances per shard, tick, lease TTL).
   * @default localPacerSettings (4 shards × 3 instances, 10 s ticks)
   */
  readonly pacer?: Partial<PacerSettings>;
  /**
   * Length of a schedule "minute", ms: scales EventBridge's minute down for fast tests. The
   * pacer is told the same length (its `minuteMs`), so it runs its ticks inside it. @default 60_000
   */
  readonly msPerMinute?: number;
  /**
   * How scheduled functions are fired: like EventBridge (each rule at its own second, delivery
   * delay 0–20 s, an occasional duplicate and missed delivery; `local/scheduler.ts`) or exactly on
   * each minute. @default { mode: 'eventbridge' } with a random seed (printed in the banner)
   */
  readonly scheduler?: ScheduleTiming;
  /** Where function instances' stdout/stderr go. @default 'inherit' */
  readonly functionOutput?: 'inherit' | 'ignore';
  /**
   * Run instances from esbuild bundles on plain `node` (as Lambda runs the CDK's bundles) instead
   * of compiling TypeScript with `tsx` at every cold start: about half the CPU per cold start.
   * Bundles are rebuilt when a source changed (restart to pick up a code change). A handler that
   * cannot be bundled runs through `tsx`, so its error shows at invoke time. @default false
   * (`npm start` turns it on; `--no-bundle` turns it off)
   */
  readonly bundle?: boolean;
  /**
   * Port of the live dashboard (`npm start` only; 0 = any free port).
   * @default DEFAULT_DASHBOARD_PORT, or any free port when it is taken
   */
  readonly dashboardPort?: number;
  /** Run only these functions (tests that do not need the others). @default every function */
  readonly functions?: readonly FunctionKey[];
  /**
   * Extra environment per function name, over the description's (fault injection in tests, e.g.
   * `{ pacer: { PACER_FAULT_PAUSE_BEFORE_PUBLISH_MS: '800' } }`). @default {}
   */
  readonly extraEnv?: Readonly<Record<string, Readonly<Record<string, string>>>>;
  /**
   * Keep every region's state under `<dataDir>/<region>/` across restarts (Redis append-only
   * file, dynalite and kinesalite LevelDB stores, SSM parameters, S3 objects, stream
   * checkpoints). @default in memory: a restart starts empty
   */
  readonly dataDir?: string;
  /**
   * Stable ports: region number `i` listens on the block `basePort + 10 i` (`regionPorts`).
   * @default free ports (`npm start` uses {@link DEFAULT_BASE_PORT})
   */
  readonly basePort?: number;
  /**
   * Instance logs: each instance's output in `<dir>/<region>/<function>-<pid>.log`, and the
   * console (`log`) gets one line per invocation (`compact`) or that plus every instance's
   * output (`full`). @default none: instances write to `functionOutput`, no invocation lines
   */
  readonly logs?: { readonly dir: string; readonly console: ConsoleLogMode };
  readonly log?: (line: string) => void;
  /** Where supervision reports go (an emulator died, was restarted). @default `log` */
  readonly alert?: (line: string) => void;
  /** Replication lag of the global tables between the local regions, ms. @default 500 */
  readonly replicationLagMs?: number;
  /**
   * The local IAM layer: every call a function or the ad-server client makes is checked against
   * the policy the stack synthesizes for it (docs/local-region.md, "IAM"); refusals are logged.
   * `'off'` lets every call through (`npm start -- --iam off`). `edit` changes the synthesized
   * policies before they are enforced (tests: a grant removed). @default on
   */
  readonly iam?: 'off' | { readonly edit?: (set: LocalPolicySet) => LocalPolicySet };
}

/** The description a runtime provisions and runs, from its options. */
export function runtimeDescription(
  options: Pick<RuntimeOptions, 'pacer' | 'msPerMinute'>,
): RegionDescription {
  return regionDescription({
    pacer: {
      ...localPacerSettings,
      ...options.pacer,
      ...(options.msPerMinute === undefined ? {} : { minuteMs: options.msPerMinute }),
    },
  });
}

/** One running region with its functions. */
export interface RegionRuntime {
  readonly region: LocalRegion;
  readonly description: RegionDescription;
  readonly invokers: ReadonlyMap<FunctionKey, ProcessInvoker>;
  readonly pollers: ReadonlyMap<FunctionKey, KinesisPoller>;
  readonly onFailure: ReadonlyMap<FunctionKey, LocalOnFailureDestination>;
  readonly scheduler: Scheduler;
  /** Resolves when the handler bundles are in use (at once without `bundle`). */
  readonly bundled: Promise<void>;
  /** Handler module each function runs. */
  readonly handlerModules: ReadonlyMap<FunctionKey, string>;
  /** What the emulators' supervisors reported so far (deaths, restarts). */
  readonly supervisionEvents: readonly SupervisionEvent[];
  /** Folder of this region's instance logs, when kept. */
  readonly logDir?: string;
  stop(): Promise<void>;
}

async function startRegionRuntime(
  region: LocalRegion,
  options: RuntimeOptions,
  peerEnv: Readonly<Record<string, string>>,
  supervisionEvents: readonly SupervisionEvent[],
): Promise<RegionRuntime> {
  const name = region.region;
  const log = options.log ?? (() => {});
  const description = region.description;
  const dataDir = region.dataDir;
  const logDir = options.logs ? join(options.logs.dir, name) : undefined;
  const logs = logDir
    ? new InstanceLogs({ dir: logDir, echo: options.logs?.console === 'full', prefix: `[${name}] ` })
    : undefined;
  const checkpointsFor = (fn: string): CheckpointStore | undefined =>
    dataDir === undefined ? undefined : new FileCheckpointStore(join(dataDir, 'checkpoints', `${fn}.json`));
  const invokers = new Map<FunctionKey, ProcessInvoker>();
  const pollers = new Map<FunctionKey, KinesisPoller>();
  const readers: { destroy(): void }[] = [];
  const onFailure = new Map<FunctionKey, LocalOnFailureDestination>();
  const targets: ScheduleTarget[] = [];
  const handlerModules = new Map<FunctionKey, string>();
  const stateDir = options.stateDir ?? join(repoRoot, '.local');
  const keys = (Object.keys(description.functions) as FunctionKey[]).filter(
    (k) => !options.functions || options.functions.includes(k),
  );
  try {
    for (const key of keys) {
      const spec: FunctionSpec = description.functions[key];
      const invoker = new ProcessInvoker({
        functionName: spec.name,
        handlerModule: options.handlerOverrides?.[spec.name] ?? spec.entry,
        // The pacer also gets every region's name and local API endpoints (its peers' switches
        // and caches: docs/pacing.md, "Many regions").
        env: {
          ...region.functionEnv(key),
          ...(key === 'pacer' ? peerEnv : {}),
          ...options.extraEnv?.[spec.name],
        },
        timeoutMs: spec.timeoutSeconds * 1000,
        memoryMb: spec.memoryMb,
        ...(options.functionOutput ? { stdio: options.functionOutput } : {}),
        ...(logs
          ? {
              logs,
              onInvocation: (record) =>
                log(
                  formatInvocation(name, record, record.pid ? logs.file(spec.name, record.pid) : undefined),
                ),
            }
          : {}),
      });
      invokers.set(key, invoker);
      handlerModules.set(key, options.handlerOverrides?.[spec.name] ?? spec.entry);
      if (spec.source) {
        const destination = new LocalOnFailureDestination({
          file: join(stateDir, name, 'on-failure', `${spec.name}.jsonl`),
        });
        onFailure.set(key, destination);
        // Lambda reads the stream with the function's execution role: so does the local poller.
        const streamReader = kinesisClient({
          ...region.endpoints,
          credentials: principalCredentials(name, spec.name),
        });
        readers.push(streamReader);
        pollers.set(
          key,
          new KinesisPoller({
            kinesis: streamReader,
            streamName: region.streamName(spec.source.stream),
            source: spec.source,
            invoker,
            onFailure: destination,
            region: name,
            ...withCheckpoints(checkpointsFor(spec.name)),
            log: (line) => log(`[${name}] ${line}`),
          }),
        );
      }
      if (spec.schedule) targets.push(...scheduleTargets(spec.name, spec.schedule, invoker));
    }
    const scheduler = new Scheduler(targets, {
      region: name,
      ...(options.msPerMinute === undefined ? {} : { msPerMinute: options.msPerMinute }),
      ...(options.scheduler ? { timing: options.scheduler } : {}),
      onResult: (target, _at, result) => {
        if (!result.ok) log(`[${name}] ${target.ruleName}: ${result.errorType}: ${result.errorMessage}`);
      },
      // Only the unusual deliveries: they explain a gap or a second invocation in the logs.
      onFiring: (target, firing) => {
        const at = new Date(firing.scheduledAt).toISOString().slice(11, 23);
        if (firing.deliverAt.length === 0) log(`[${name}] ${target.ruleName}: firing of ${at} not delivered`);
        if (firing.deliverAt.length > 1) log(`[${name}] ${target.ruleName}: firing of ${at} delivered twice`);
      },
    });
    // Bundles are built in the background: the region is ready at once, instances started before
    // the bundles exist run through tsx, later ones from the bundles.
    const bundling = options.bundle
      ? bundleFunctions(keys, description, options, log).then(
          (b) => {
            for (const [key, handler] of b.handlers) invokers.get(key)?.useBundle(b.workerEntry, handler);
          },
          (error: unknown) =>
            log(`[${name}] bundling failed, running handlers through tsx: ${String(error)}`),
        )
      : Promise.resolve();
    await Promise.all([...pollers.values()].map((p) => p.start()));
    // Prewarmed instances start from the bundles (half the CPU of a tsx cold start).
    if (options.prewarm) await bundling;
    if (options.prewarm) await Promise.all([...invokers.values()].map((i) => i.prewarm(1)));
    scheduler.start();
    return {
      region,
      description,
      invokers,
      pollers,
      onFailure,
      scheduler,
      bundled: bundling,
      handlerModules,
      supervisionEvents,
      ...(logDir ? { logDir } : {}),
      async stop() {
        // Closing the invokers kills the instances, which also cuts in-flight invocations short.
        await Promise.all([
          scheduler.stop(),
          ...[...pollers.values()].map((p) => p.stop()),
          ...[...invokers.values()].map((i) => i.close()),
        ]);
        for (const r of readers) r.destroy();
        await logs?.close();
        await region.stop();
      },
    };
  } catch (error) {
    for (const r of readers) r.destroy();
    await Promise.all([...invokers.values()].map((i) => i.close()));
    await logs?.close();
    await region.stop();
    throw error;
  }
}

function withCheckpoints(checkpoints: CheckpointStore | undefined): { checkpoints?: CheckpointStore } {
  return checkpoints ? { checkpoints } : {};
}

/** Bundles the worker entry and each function's handler; a handler that fails to bundle runs via tsx. */
async function bundleFunctions(
  keys: readonly FunctionKey[],
  description: RegionDescription,
  options: RuntimeOptions,
  log: (line: string) => void,
): Promise<{ workerEntry: string; handlers: Map<FunctionKey, string> }> {
  const workerEntry = await bundleModule('local/worker/worker-entry.ts', repoRoot);
  const handlers = new Map<FunctionKey, string>();
  await Promise.all(
    keys.map(async (key) => {
      const spec: FunctionSpec = description.functions[key];
      const module = options.handlerOverrides?.[spec.name] ?? spec.entry;
      try {
        handlers.set(key, await bundleModule(module, repoRoot));
      } catch (error) {
        log(`${spec.name}: not bundled (${(error as Error).message.split('\n')[0]}); running it through tsx`);
      }
    }),
  );
  return { workerEntry, handlers };
}

/**
 * Starts every region; if one fails, the others are stopped before the error propagates. With
 * several regions their global tables are linked by the stand-in (`local/global-tables.ts`).
 */
export async function startRuntime(options: RuntimeOptions): Promise<RegionRuntime[]> {
  const description = runtimeDescription(options);
  const link =
    options.regions.length > 1
      ? new GlobalTablesStandIn({ lagMs: options.replicationLagMs ?? 500 })
      : undefined;
  const alert = options.alert ?? options.log ?? (() => {});
  // One IAM layer for every region: a pacer calls its peers' endpoints with its own key.
  const iam: LocalIam | 'off' =
    options.iam === 'off'
      ? 'off'
      : await localIam(options.regions, description, {
          ...(options.iam?.edit ? { edit: options.iam.edit } : {}),
          onRefusal: (r) => alert(formatRefusal(r)),
          onSynthesize: (regions) =>
            (options.log ?? (() => {}))(
              `IAM: synthesizing the stack's policies for ${regions.join(', ')} (once after a change to the stack; cached in .paceline/iam)…`,
            ),
        });
  const supervision = new Map<string, SupervisionEvent[]>();
  const regions = await Promise.allSettled(
    options.regions.map((r, index) => {
      const events: SupervisionEvent[] = [];
      supervision.set(r, events);
      const dataDir = options.dataDir === undefined ? undefined : resolve(options.dataDir, r);
      return startLocalRegion({
        region: r,
        redisMode: options.redisMode,
        description,
        deploymentRegions: options.regions,
        iam,
        ...(link ? { globalTables: link } : {}),
        ...(options.basePort ? { ports: regionPorts(options.basePort, index, options.redisMode) } : {}),
        ...(dataDir === undefined ? {} : { dataDir }),
        onSupervisionEvent: (event) => {
          events.push(event);
          alert(formatSupervisionEvent(r, event));
        },
      });
    }),
  );
  const up = regions.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  const down = regions.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (down) {
    await Promise.all(up.map((r) => r.stop()));
    await link?.stop();
    throw down.reason;
  }
  const peerEnv = {
    [REGIONS_ENV]: options.regions.join(','),
    [REGION_ENDPOINTS_ENV]: JSON.stringify(
      Object.fromEntries(
        up.map((r) => [r.region, { ssm: r.endpoints.ssm, elasticache: r.endpoints.elasticache }]),
      ),
    ),
  };
  const settled = await Promise.allSettled(
    up.map((r) => startRegionRuntime(r, options, peerEnv, supervision.get(r.region) ?? [])),
  );
  const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  const started = settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  if (failed) {
    await Promise.all(started.map((r) => r.stop()));
    await link?.stop();
    throw failed.reason;
  }
  if (!link) return started;
  // The replication stops with the last region.
  let running = started.length;
  return started.map((rt) => ({
    ...rt,
    async stop() {
      await rt.stop();
      if (--running === 0) await link.stop();
    },
  }));
}

function describeIam(iam: LocalIam | undefined): string {
  if (!iam) return 'off (--iam off): every call is let through';
  const s = iam.policies.synthesis;
  const from = iam.origin?.cached
    ? `cached from a synthesis of ${(s.synthMs / 1000).toFixed(1)} s`
    : `synthesized now in ${(s.synthMs / 1000).toFixed(1)} s`;
  return `enforced: each function and the ad-server client (PACELINE_CLIENT_ACCESS_KEY_ID) is held to its synthesized policy (${from}, ${s.regions.join(', ')}); AWS_ACCESS_KEY_ID=local is the unchecked operator`;
}

/** One console line for a call the local IAM layer refused. */
export function formatRefusal(r: Refusal): string {
  return `[${r.region}] IAM refused ${r.principal}: ${r.action} on ${r.resource} (${r.service})`;
}

/** The banner: every endpoint a developer or a client needs. */
export function describeRuntime(runtimes: readonly RegionRuntime[]): string {
  const lines: string[] = [];
  for (const rt of runtimes) {
    const r = rt.region;
    lines.push(`Region ${r.region}`);
    lines.push(
      `  State:    ${r.dataDir ? `${r.dataDir} (kept across restarts)` : 'in memory (gone on stop; --data-dir DIR keeps it)'}`,
    );
    if (rt.logDir) lines.push(`  Logs:     ${rt.logDir}/<function>-<pid>.log`);
    lines.push(`  Redis (${r.redis.mode}): ${r.redis.nodes.join(', ')}`);
    lines.push(`  DynamoDB: ${r.endpoints.dynamodb}`);
    lines.push(`  Kinesis:  ${r.endpoints.kinesis}`);
    lines.push(`  SSM:      ${r.endpoints.ssm}`);
    lines.push(
      `  ElastiCache API: ${r.endpoints.elasticache} (DescribeReplicationGroups → this region's Redis)`,
    );
    lines.push(
      `  S3:       ${r.endpoints.s3} (s3rver; buckets ${Object.values(regionResources.buckets)
        .map((b) => physicalName(b.suffix))
        .join(', ')})`,
    );
    lines.push(
      `  Tables:   ${Object.values(regionResources.tables)
        .map((t) => physicalName(t.suffix))
        .join(', ')}`,
    );
    lines.push(
      `  Streams:  ${Object.values(regionResources.streams)
        .map((s) => `${physicalName(s.suffix)} (${s.shardCount} shards)`)
        .join(', ')}`,
    );
    lines.push(`  Schedules: ${describeTiming(rt.scheduler)}`);
    for (const key of Object.keys(rt.description.functions) as FunctionKey[]) {
      const spec: FunctionSpec = rt.description.functions[key];
      const handlerPath = resolve(repoRoot, rt.handlerModules.get(key) ?? spec.entry);
      const missing = existsSync(handlerPath)
        ? ''
        : '  [handler module not found yet: invocations fail until it exists]';
      if (spec.source) {
        const s = spec.source;
        lines.push(
          `  λ ${spec.name} ← ${physicalName(regionResources.streams[s.stream].suffix)}: batch ${s.batchSize}, window ${s.maxBatchingWindowSeconds}s, ` +
            `bisect ${s.bisectBatchOnFunctionError}, retries ${s.retryAttempts}, max age ${s.maxRecordAgeSeconds}s${missing}`,
        );
        lines.push(`      on-failure → ${rt.onFailure.get(key)?.location}`);
      }
      if (spec.schedule) {
        const pacer = key === 'pacer' ? rt.description.settings.pacer : undefined;
        const layout = pacer
          ? `: ${pacer.shards} shards × ${pacer.instancesPerShard} instances, ${pacer.tickMs / 1000} s ticks, lease ${pacer.leaseTtlMs / 1000} s`
          : '';
        lines.push(
          `  λ ${spec.name} ← schedule rate(${spec.schedule.rateMinutes} minute), ${Math.max(1, spec.schedule.instances.length)} rule(s)${layout}${missing}`,
        );
      }
      const pids = rt.invokers.get(key)?.pids ?? [];
      if (pids.length > 0) lines.push(`      instances: pid ${pids.join(', ')}`);
    }
    lines.push(`  IAM:      ${describeIam(r.iam)}`);
    lines.push(
      `  Client env: ${Object.entries(r.clientEnv)
        .map(([k, v]) => `${k}=${v}`)
        .join(' ')}`,
    );
  }
  return lines.join('\n');
}

/** One line on how the region's scheduler times its rules (the seed reproduces a run's timing). */
export function describeTiming(scheduler: Scheduler): string {
  const t = scheduler.timing;
  if (t.mode === 'exact')
    return 'exact (every rule on the minute, delivered at once, once; --scheduler exact)';
  const pct = (r: number) => `${Number((r * 100).toFixed(2))} %`;
  return (
    `EventBridge-like (seed ${t.seed}): each rule at its own second, delivery delay 0–${t.maxDelayMs / 1000} s, ` +
    `${pct(t.duplicateRate)} delivered twice, ${pct(t.missRate)} missed; --scheduler exact fires on the minute`
  );
}

function parseCli(argv: readonly string[]): CliOptions {
  const { values } = parseArgs({
    args: [...argv],
    options: {
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
    },
  });
  if (values.help) {
    console.log(
      'Usage: npm start -- [--regions us-east-1,us-west-2] [--redis standalone|cluster] [--prewarm]\n' +
        `                    [--pacer-shards N] [--pacer-instances K]   (pacer layout; default ${localPacerSettings.shards} × ${localPacerSettings.instancesPerShard}, AWS 24 × 3)\n` +
        '                    [--handler <function>=<module path>]...   (run a function with another handler module)\n' +
        '                    [--no-bundle]   (compile handlers with tsx at each cold start instead of esbuild bundles)\n' +
        '                    [--data-dir DIR]   (keep state across restarts: Redis AOF, DynamoDB, Kinesis, SSM, S3; default in memory)\n' +
        `                    [--base-port N]   (stable ports: region i uses N+10i…N+10i+8; default ${DEFAULT_BASE_PORT}; 0 = free ports)\n` +
        "                    [--logs compact|full]   (console: one line per invocation (default), or every instance's output too)\n" +
        '                    [--state-dir DIR]   (env files and instance logs; default .paceline)\n' +
        '                    [--dashboard-port N]   (live dashboard; default 7400, any free port when taken; 0 = any)\n' +
        "                    [--scheduler eventbridge|exact]   (schedule timing: EventBridge's (default) or exactly on the minute)",
      "                    [--iam on|off]   (check every function's and the ad-server client's calls against their synthesized IAM policies; default on)",
    );
    process.exit(0);
  }
  const redis = values.redis ?? 'standalone';
  if (redis !== 'standalone' && redis !== 'cluster') {
    throw new UsageError(`--redis must be 'standalone' or 'cluster', got '${redis}'`);
  }
  const regions = (values.regions ?? defaultRegions.join(','))
    .split(',')
    .map((r) => r.trim())
    .filter(Boolean);
  if (regions.length === 0 || new Set(regions).size !== regions.length) {
    throw new UsageError(`--regions needs distinct region names, e.g. --regions us-east-1,us-west-2`);
  }
  const names = new Set<string>(Object.values(regionResources.functions).map((f) => f.name));
  const handlerOverrides: Record<string, string> = {};
  for (const pair of values.handler ?? []) {
    const [fn, module] = pair.split('=', 2);
    if (!fn || !module || !names.has(fn)) {
      throw new UsageError(
        `--handler takes <function>=<module>, function one of ${[...names].join(', ')}; got '${pair}'`,
      );
    }
    handlerOverrides[fn] = module;
  }
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
  const basePortRaw = values['base-port'] ?? String(DEFAULT_BASE_PORT);
  const basePort = Number(basePortRaw);
  const highest = basePort + 10 * (regions.length - 1) + 8;
  if (!/^\d+$/.test(basePortRaw) || (basePort !== 0 && (basePort < 1024 || highest + 10000 > 65535))) {
    throw new UsageError(
      `--base-port takes 0 (free ports) or a port from 1024 leaving room for ${regions.length} region block(s) and cluster bus ports (+10000), got '${basePortRaw}'`,
    );
  }
  const logsMode = values.logs ?? 'compact';
  if (logsMode !== 'compact' && logsMode !== 'full') {
    throw new UsageError(`--logs must be 'compact' or 'full', got '${logsMode}'`);
  }
  const timing = values.scheduler ?? 'eventbridge';
  if (!(SCHEDULE_TIMING_MODES as readonly string[]).includes(timing)) {
    throw new UsageError(
      `--scheduler must be ${SCHEDULE_TIMING_MODES.map((m) => `'${m}'`).join(' or ')}, got '${timing}'`,
    );
  }
  const iamMode = values.iam ?? 'on';
  if (iamMode !== 'on' && iamMode !== 'off')
    throw new UsageError(`--iam must be 'on' or 'off', got '${iamMode}'`);
  const stateDir = resolve(values['state-dir'] ?? (process.env[STATE_DIR_ENV] || stateFolder(repoRoot)));
  const dashboardRaw = values['dashboard-port'];
  if (dashboardRaw !== undefined && (!/^\d+$/.test(dashboardRaw) || Number(dashboardRaw) > 65_535))
    throw new UsageError(`--dashboard-port takes a port number (0 = any free port), got '${dashboardRaw}'`);
  try {
    runtimeDescription({ pacer });
  } catch (error) {
    if (error instanceof InvalidPacerSettingsError) throw new UsageError(error.message);
    throw error;
  }
  return {
    regions,
    redisMode: redis,
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
export class UsageError extends PacelineError {
  override readonly name = 'UsageError';
  override readonly code = 'local.usage';
}

/** Set when the runner begins to stop (see the `log` and `alert` options of parseCli). */
let stopRequested = false;

/** Writes a line to stdout; resolves once it is out (the process exits right after). */
function printLine(line: string): Promise<void> {
  return new Promise((resolve) => process.stdout.write(`${line}\n`, () => resolve()));
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
  let runtimes: RegionRuntime[] | undefined;
  let dashboard: Dashboard | undefined;
  let stopping: Promise<void> | undefined;
  const shutdown = (_reason: string) => {
    // A Ctrl-C reaches the runner twice (from the terminal, and relayed by npm): one stop.
    if (stopping) return;
    stopRequested = true;
    stopping = (async () => {
      // A child that ignores its stop request must not keep the runner (and itself) alive.
      const timer = setTimeout(() => {
        console.error('Shutdown took over 15 s; killing remaining children.');
        for (const rt of runtimes ?? []) {
          for (const pid of [...rt.region.redis.pids, ...[...rt.invokers.values()].flatMap((i) => i.pids)]) {
            try {
              process.kill(pid, 'SIGKILL');
            } catch {}
          }
        }
        process.exit(1);
      }, 15_000);
      await dashboard?.stop();
      // One line per region, once it is down (and nothing else).
      await Promise.all(
        (runtimes ?? []).map(async (rt) => {
          await rt.stop();
          const state = rt.region.dataDir
            ? `state kept in ${rt.region.dataDir}`
            : 'in-memory state discarded';
          await printLine(`${rt.region.region} stopped (${state})`);
        }),
      );
      clearTimeout(timer);
      process.exit(0);
    })();
  };
  let pendingSignal: string | undefined;
  const onSignal = (signal: string) => {
    if (runtimes) shutdown(signal);
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
  try {
    runtimes = await startRuntime(options);
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
  console.log(describeRuntime(runtimes));
  // The client environment of each region, for `source .paceline/<region>.env`; marked stale
  // (unsets the variables, returns 1) when the runner stops.
  for (const rt of runtimes) {
    const path = writeEnvFile(options.envDir, rt.region.region, rt.region.clientEnv);
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
    for (const rt of runtimes ?? []) {
      try {
        markEnvFileStale(
          options.envDir,
          rt.region.region,
          Object.keys(rt.region.clientEnv),
          `runner pid ${process.pid} stopped at ${new Date().toISOString()}`,
        );
      } catch {}
    }
  });
  try {
    dashboard = await startDashboard({
      regions: runtimes.map((rt) => ({ region: rt.region.region, env: rt.region.clientEnv })),
      ...(options.dashboardPort === undefined ? {} : { port: options.dashboardPort }),
      onError: (error) => console.error(`dashboard: ${String(error)}`),
    });
    console.log(
      `Dashboard: ${dashboard.url} (live charts of every region; docs/local-region.md "Dashboard")`,
    );
  } catch (error) {
    // The regions work without it: say why there is no dashboard instead of failing the start.
    console.error(`Dashboard not started: ${(error as Error).message}`);
  }
  // Lets `paceline …` find the running local regions without pasting their env.
  const regionsFile = localRegionsFile(options.envDir);
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
