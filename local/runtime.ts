/**
 * The local regions' runtime, reusable from tests (`npm start` is its CLI: local/main.ts): for each
 * region the emulators and the provisioning (local/region.ts), then every function — a Kinesis
 * event-source mapping per function with a `source`, the EventBridge scheduler for functions
 * with a `schedule`, each function instance in its own process. With several regions their global
 * tables are linked by the stand-in (local/global-tables.ts) and the pacer is told its peers.
 */

import { join, resolve } from 'node:path';
import { kinesisClient, REGION_ENDPOINTS_ENV, REGIONS_ENV } from '../shared/aws/clients.js';
import {
  type FunctionKey,
  type FunctionSpec,
  localPacerSettings,
  type PacerSettings,
  type RegionDescription,
  regionDescription,
} from '../shared/region/resources.js';
import { formatRefusal } from './banner.js';
import { formatSupervisionEvent, type SupervisionEvent } from './emulators/supervision.js';
import { type CheckpointStore, FileCheckpointStore } from './esm/checkpoints.js';
import { LocalOnFailureDestination } from './esm/on-failure.js';
import { KinesisPoller } from './esm/poller.js';
import { GlobalTablesStandIn } from './global-tables.js';
import type { LocalIam } from './iam/gate.js';
import { type LocalPolicySet, principalCredentials } from './iam/policy.js';
import { type ConsoleLogMode, formatInvocation, InstanceLogs } from './logs.js';
import { type LocalRegion, localIam, regionPorts, startLocalRegion } from './region.js';
import { Scheduler, type ScheduleTarget, type ScheduleTiming, scheduleTargets } from './scheduler.js';
import { bundleModule } from './worker/bundle.js';
import { ProcessInvoker, repoRoot } from './worker/process-invoker.js';

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

/** What a region's functions are wired to, filled by {@link wireFunction}. */
interface RegionWiring {
  readonly invokers: Map<FunctionKey, ProcessInvoker>;
  readonly pollers: Map<FunctionKey, KinesisPoller>;
  readonly readers: { destroy(): void }[];
  readonly onFailure: Map<FunctionKey, LocalOnFailureDestination>;
  readonly targets: ScheduleTarget[];
  readonly handlerModules: Map<FunctionKey, string>;
}

/** The instance logs of a region, when kept. */
function regionLogs(name: string, options: RuntimeOptions): { logDir?: string; logs?: InstanceLogs } {
  if (!options.logs) return {};
  const logDir = join(options.logs.dir, name);
  return {
    logDir,
    logs: new InstanceLogs({ dir: logDir, echo: options.logs.console === 'full', prefix: `[${name}] ` }),
  };
}

/** One function of a region: its process invoker, its event-source poller, its schedule targets. */
function wireFunction(
  key: FunctionKey,
  region: LocalRegion,
  options: RuntimeOptions,
  context: { peerEnv: Readonly<Record<string, string>>; logs?: InstanceLogs; log: (line: string) => void },
  wiring: RegionWiring,
): void {
  const name = region.region;
  const { logs, log } = context;
  const spec: FunctionSpec = region.description.functions[key];
  const handlerModule = options.handlerOverrides?.[spec.name] ?? spec.entry;
  const invoker = new ProcessInvoker({
    functionName: spec.name,
    handlerModule,
    // The pacer also gets every region's name and local API endpoints (its peers' switches
    // and caches: docs/pacing.md, "Many regions").
    env: {
      ...region.functionEnv(key),
      ...(key === 'pacer' ? context.peerEnv : {}),
      ...options.extraEnv?.[spec.name],
    },
    timeoutMs: spec.timeoutSeconds * 1000,
    memoryMb: spec.memoryMb,
    ...(options.functionOutput ? { stdio: options.functionOutput } : {}),
    ...(logs
      ? {
          logs,
          onInvocation: (record) =>
            log(formatInvocation(name, record, record.pid ? logs.file(spec.name, record.pid) : undefined)),
        }
      : {}),
  });
  wiring.invokers.set(key, invoker);
  wiring.handlerModules.set(key, handlerModule);
  if (spec.source) {
    const stateDir = options.stateDir ?? join(repoRoot, '.local');
    const destination = new LocalOnFailureDestination({
      file: join(stateDir, name, 'on-failure', `${spec.name}.jsonl`),
    });
    wiring.onFailure.set(key, destination);
    // Lambda reads the stream with the function's execution role: so does the local poller.
    const streamReader = kinesisClient({
      ...region.endpoints,
      credentials: principalCredentials(name, spec.name),
    });
    wiring.readers.push(streamReader);
    const checkpoints =
      region.dataDir === undefined
        ? undefined
        : new FileCheckpointStore(join(region.dataDir, 'checkpoints', `${spec.name}.json`));
    wiring.pollers.set(
      key,
      new KinesisPoller({
        kinesis: streamReader,
        streamName: region.streamName(spec.source.stream),
        source: spec.source,
        invoker,
        onFailure: destination,
        region: name,
        ...withCheckpoints(checkpoints),
        log: (line) => log(`[${name}] ${line}`),
      }),
    );
  }
  if (spec.schedule) wiring.targets.push(...scheduleTargets(spec.name, spec.schedule, invoker));
}

/** The region's scheduler; it logs failed invocations and the unusual deliveries. */
function regionScheduler(
  name: string,
  targets: readonly ScheduleTarget[],
  options: RuntimeOptions,
  log: (line: string) => void,
): Scheduler {
  return new Scheduler([...targets], {
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
  const { logDir, logs } = regionLogs(name, options);
  const wiring: RegionWiring = {
    invokers: new Map(),
    pollers: new Map(),
    readers: [],
    onFailure: new Map(),
    targets: [],
    handlerModules: new Map(),
  };
  const { invokers, pollers, readers } = wiring;
  const keys = (Object.keys(description.functions) as FunctionKey[]).filter(
    (k) => !options.functions || options.functions.includes(k),
  );
  try {
    for (const key of keys)
      wireFunction(key, region, options, { peerEnv, ...(logs ? { logs } : {}), log }, wiring);
    const scheduler = regionScheduler(name, wiring.targets, options, log);
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
      onFailure: wiring.onFailure,
      scheduler,
      bundled: bundling,
      handlerModules: wiring.handlerModules,
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
