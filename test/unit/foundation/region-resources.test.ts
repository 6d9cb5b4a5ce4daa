import { describe, expect, it } from 'vitest';
import {
  AUTO_LEADER,
  defaultPacerSettings,
  type FunctionSpec,
  functionEnvironment,
  InvalidPacerSettingsError,
  leaderOverridePath,
  PACER_NODE_OPTIONS,
  pacerEnv,
  parameterPrefix,
  physicalName,
  regionDescription,
  regionResources,
  resourceName,
  type TableKey,
} from '../../../shared/region/resources.js';

const allFunctions: FunctionSpec[] = Object.values(regionResources.functions);
const streamFunctions = allFunctions.filter(
  (f): f is FunctionSpec & { source: NonNullable<FunctionSpec['source']> } => f.source !== undefined,
);

const inputs = {
  region: 'eu-west-1',
  tableName: (k: string) => `T-${k}`,
  streamName: (k: string) => `S-${k}`,
  bucketName: (k: string) => `B-${k}`,
  redis: { nodes: 'h:6380', mode: 'cluster' as const, tls: true },
};

describe('region description', () => {
  it('gives every resource a unique physical name', () => {
    const names = [
      ...Object.values(regionResources.tables).map((t) => physicalName(t.suffix)),
      ...Object.values(regionResources.streams).map((s) => physicalName(s.suffix)),
    ];
    expect(new Set(names).size).toBe(names.length);
  });

  it('resolves a resource name from its variable, else its physical name', () => {
    const t = regionResources.tables.budgets;
    expect(resourceName(t, {})).toBe('paceline-budgets');
    expect(resourceName(t, { BUDGETS_TABLE: '' })).toBe('paceline-budgets');
    expect(resourceName(t, { BUDGETS_TABLE: 'custom' })).toBe('custom');
  });

  it('references only streams, tables and buckets it defines', () => {
    for (const fn of allFunctions) {
      if (fn.source) expect(regionResources.streams).toHaveProperty(fn.source.stream);
      for (const t of Object.keys(fn.tables)) expect(regionResources.tables).toHaveProperty(t);
      for (const b of Object.keys(fn.buckets ?? {})) expect(regionResources.buckets).toHaveProperty(b);
    }
  });

  it('derives exactly the environment a function declares it uses', () => {
    for (const fn of allFunctions) {
      const env = functionEnvironment(fn, inputs);
      expect(env.POWERTOOLS_SERVICE_NAME).toBe(fn.name);
      expect(env.PACELINE_REGION).toBe('eu-west-1');
      for (const [name, value] of Object.entries(fn.settings)) expect(env[name]).toBe(value);
      for (const [key, spec] of Object.entries(regionResources.tables)) {
        expect(env[spec.envVar]).toBe(key in fn.tables ? `T-${key}` : undefined);
      }
      for (const [key, spec] of Object.entries(regionResources.buckets)) {
        expect(env[spec.envVar]).toBe(key in (fn.buckets ?? {}) ? `B-${key}` : undefined);
      }
      if (fn.source) {
        const stream = regionResources.streams[fn.source.stream];
        expect(env[stream.envVar]).toBe(`S-${fn.source.stream}`);
      }
      expect(env.REDIS_NODES).toBe('h:6380');
      expect(env.REDIS_TLS).toBe('true');
      expect(env.PARAMETER_PREFIX).toBe(fn.readsParameters ? parameterPrefix('eu-west-1') : undefined);
      // A function's Node flags reach every process that runs it through NODE_OPTIONS.
      const flags: readonly string[] = fn.nodeOptions ?? [];
      expect(env.NODE_OPTIONS).toBe(flags.length > 0 ? flags.join(' ') : undefined);
    }
    expect(regionResources.functions.pacer.nodeOptions).toEqual(PACER_NODE_OPTIONS);
  });

  it('refuses to build the environment of a Redis function without a Redis endpoint', () => {
    const fn = regionResources.functions.ingestActions;
    expect(() => functionEnvironment(fn, { ...inputs, redis: undefined })).toThrow(/uses Redis/);
  });

  it('keeps the safe stream defaults on every source', () => {
    for (const fn of streamFunctions) {
      expect(fn.source.bisectBatchOnFunctionError).toBe(true);
      expect(fn.source.retryAttempts).toBeGreaterThanOrEqual(0);
      expect(fn.source.retryAttempts).toBeLessThanOrEqual(10);
      expect(fn.source.maxRecordAgeSeconds).toBeGreaterThan(0);
      expect(fn.source.reportBatchItemFailures).toBe(true);
    }
  });

  it('gives only write access to the dead-letter table where quarantine is all a function does there', () => {
    const access: TableKey = 'deadLetters';
    expect(regionResources.functions.ingestActions.tables[access]).toBe('write');
  });
});

describe('function settings', () => {
  it('track-spend uses the same in-flight lifetime and slot as the guard default', async () => {
    const { defaultInFlight } = await import('../../../shared/spend/reconcile.js');
    const s = regionResources.functions.trackSpend.settings;
    expect(Number(s.IN_FLIGHT_TTL_MS)).toBe(defaultInFlight.ttlMs);
    expect(Number(s.IN_FLIGHT_SLOT_MS)).toBe(defaultInFlight.slotMs);
  });

  it("the spend sweeper shares track-spend's in-flight settings and every stream function can offload dead letters", () => {
    const { sweepSpend, trackSpend } = regionResources.functions;
    expect(sweepSpend.settings.IN_FLIGHT_TTL_MS).toBe(trackSpend.settings.IN_FLIGHT_TTL_MS);
    expect(sweepSpend.settings.IN_FLIGHT_SLOT_MS).toBe(trackSpend.settings.IN_FLIGHT_SLOT_MS);
    for (const fn of allFunctions.filter((f) => f.source)) {
      expect(fn.buckets?.deadLetterPayloads, fn.name).toBe('write');
    }
  });

  it('ingest-actions keeps the default 30-day retention and one-day dedup window', () => {
    const s = regionResources.functions.ingestActions.settings;
    expect(Number(s.COUNTING_RETENTION_DAYS)).toBe(30);
    expect(Number(s.COUNTING_DEDUP_WINDOW_MS)).toBe(24 * 60 * 60_000);
  });
});

describe('pacer layout from the settings', () => {
  it('derives one schedule rule per shard × instance with its {shard, instance} input (24 × 3 in AWS)', () => {
    const pacer = regionResources.functions.pacer;
    expect(pacer.schedule.rateMinutes).toBe(1);
    expect(pacer.schedule.instances).toHaveLength(72);
    expect(pacer.schedule.instances[0]).toEqual({ id: 's0-i0', input: { shard: 0, instance: 0 } });
    expect(pacer.schedule.instances[71]).toEqual({ id: 's23-i2', input: { shard: 23, instance: 2 } });
    expect(new Set(pacer.schedule.instances.map((i) => i.id)).size).toBe(72);
  });

  it('follows the settings: 4 × 3 locally gives 12 rules, 4 override parameters and the env', () => {
    const d = regionDescription({ pacer: { shards: 4, tickMs: 1000, leaseTtlMs: 2500, minuteMs: 6000 } });
    expect(d.functions.pacer.schedule.instances).toHaveLength(12);
    const overrides = Object.values(d.parameters).filter((p) => p.path.startsWith('pacer/leader-override/'));
    expect(overrides.map((p) => p.path)).toEqual([0, 1, 2, 3].map(leaderOverridePath));
    for (const p of overrides) expect(p.initial('us-east-1')).toBe(AUTO_LEADER);
    expect(d.functions.pacer.settings).toMatchObject({
      [pacerEnv.shards]: '4',
      [pacerEnv.instancesPerShard]: '3',
      [pacerEnv.tickMs]: '1000',
      [pacerEnv.leaseTtlMs]: '2500',
      [pacerEnv.minuteMs]: '6000',
    });
    expect(d.settings.pacer).toEqual({
      ...defaultPacerSettings,
      shards: 4,
      tickMs: 1000,
      leaseTtlMs: 2500,
      minuteMs: 6000,
    });
  });

  it('refuses settings that cannot work, saying which', () => {
    expect(() => regionDescription({ pacer: { shards: 0 } })).toThrow(InvalidPacerSettingsError);
    expect(() => regionDescription({ pacer: { tickMs: 7000 } })).toThrow(/divide/);
    expect(() => regionDescription({ pacer: { leaseTtlMs: 15_000 } })).toThrow(/leaseTtlMs/);
    expect(() => regionDescription({ pacer: { shards: 2.5 } })).toThrow(/whole number/);
  });

  it('gives the budgets table the shard index the pacer queries', () => {
    expect(regionResources.tables.budgets.indexes[0]).toMatchObject({
      name: 'by-pacer-shard',
      partitionKey: { name: 'pacerShard', type: 'S' },
      sortKey: { name: 'updatedAt', type: 'N' },
    });
  });
});
