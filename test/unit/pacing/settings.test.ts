/** The pacer's environment, its EventBridge input, the alarm specs and the temporary controller index. */
import { describe, expect, it } from 'vitest';
import { resolvePlan } from '../../../shared/budget/model.js';
import { InvalidEnvError, MissingEnvError } from '../../../shared/config/env.js';
import { pacerAlarmSpecs } from '../../../shared/pacing/alarms.js';
import { elasticityOf } from '../../../shared/pacing/controller/index.js';
import { createLinearController } from '../../../shared/pacing/controller/linear.js';
import {
  InvalidPacerInputError,
  pacerConfigFromEnv,
  parsePacerInput,
} from '../../../shared/pacing/settings.js';
import { evaluateCurve } from '../../../shared/pacing/types.js';
import {
  defaultPacerSettings,
  regionDescription,
  regionResources,
} from '../../../shared/region/resources.js';

const env = { PACELINE_REGION: 'us-east-1', ...regionResources.functions.pacer.settings };
const DAY = { day: '2026-11-21', startMs: 0, endMs: 86_400_000 };

describe('pacer configuration', () => {
  it('reads the settings the description puts in the environment', () => {
    // Memory and reserved concurrency size the function; they are not part of its environment.
    const { memoryMb: _memory, reservedConcurrency: _reserved, ...runtime } = defaultPacerSettings;
    expect(pacerConfigFromEnv(env)).toMatchObject({
      ...runtime,
      region: 'us-east-1',
      auditLogMaxLen: 10_000,
      redisSilenceMs: 5_000,
    });
  });

  it("takes the raw reads' silence limit from the environment, within the tick", () => {
    expect(pacerConfigFromEnv({ ...env, PACER_REDIS_SILENCE_MS: '3000' }).redisSilenceMs).toBe(3_000);
    expect(() => pacerConfigFromEnv({ ...env, PACER_REDIS_SILENCE_MS: '10000' })).toThrow(
      /PACER_REDIS_SILENCE_MS="10000" is invalid: expected ms from 100 to below the tick \(10000\)/,
    );
    expect(() => pacerConfigFromEnv({ ...env, PACER_REDIS_SILENCE_MS: '5s' })).toThrow(
      /PACER_REDIS_SILENCE_MS/,
    );
  });

  it('takes the auction kind from the environment and gives the controller its elasticity', () => {
    expect(pacerConfigFromEnv(env).auction).toBe('second-price');
    expect(pacerConfigFromEnv({ ...env, PACER_AUCTION: undefined }).auction).toBe('second-price');
    expect(pacerConfigFromEnv({ ...env, PACER_AUCTION: 'first-price' }).auction).toBe('first-price');
    const wrong = () => pacerConfigFromEnv({ ...env, PACER_AUCTION: 'vickrey' });
    expect(wrong).toThrow(InvalidEnvError);
    expect(wrong).toThrow(/PACER_AUCTION="vickrey" is invalid: expected first-price or second-price/);
    expect(elasticityOf('first-price')).toBe(2);
    expect(elasticityOf('second-price')).toBe(1);
    expect(
      regionDescription({ pacer: { auction: 'first-price' } }).functions.pacer.settings.PACER_AUCTION,
    ).toBe('first-price');
    expect(() => regionDescription({ pacer: { auction: 'dutch' as never } })).toThrow(
      /pacer auction = "dutch": give first-price or second-price/,
    );
  });

  it('takes the audience time zone from the environment: absent is none, a wrong one is named', () => {
    expect(pacerConfigFromEnv(env).audienceTimeZone).toBeUndefined();
    expect(
      pacerConfigFromEnv({ ...env, PACER_AUDIENCE_TIME_ZONE: 'America/New_York' }).audienceTimeZone,
    ).toBe('America/New_York');
    const wrong = () => pacerConfigFromEnv({ ...env, PACER_AUDIENCE_TIME_ZONE: 'America/Gotham' });
    expect(wrong).toThrow(InvalidEnvError);
    expect(wrong).toThrow(
      /PACER_AUDIENCE_TIME_ZONE="America\/Gotham" is invalid: expected an IANA time zone/,
    );
    const described = regionDescription({ pacer: { audienceTimeZone: 'Europe/Berlin' } });
    expect(described.functions.pacer.settings.PACER_AUDIENCE_TIME_ZONE).toBe('Europe/Berlin');
    expect(regionDescription().functions.pacer.settings).not.toHaveProperty('PACER_AUDIENCE_TIME_ZONE');
    expect(() => regionDescription({ pacer: { audienceTimeZone: '+01:00' } })).toThrow(
      /pacer audienceTimeZone = "\+01:00": give an IANA time zone/,
    );
  });

  it('names the variable that is missing or wrong', () => {
    expect(() => pacerConfigFromEnv({ ...env, PACER_SHARDS: undefined })).toThrow(MissingEnvError);
    expect(() => pacerConfigFromEnv({ ...env, PACER_TICK_MS: 'ten' })).toThrow(/PACER_TICK_MS/);
    expect(() => pacerConfigFromEnv({ ...env, PACER_TICK_MS: '7000' })).toThrow(/divide/);
  });

  it('accepts only {shard, instance} of the layout as input', () => {
    expect(parsePacerInput({ shard: 23, instance: 2 }, defaultPacerSettings)).toEqual({
      shard: 23,
      instance: 2,
      instanceId: 's23-i2',
    });
    for (const bad of [
      { shard: 24, instance: 0 },
      { shard: 0, instance: 3 },
      { shard: '1', instance: 0 },
      null,
      {},
      { shard: 1.5, instance: 0 },
    ]) {
      expect(() => parsePacerInput(bad, defaultPacerSettings)).toThrow(InvalidPacerInputError);
    }
  });
});

describe('alarm specs', () => {
  it('gives every shard its three alarms, the function one overrun, one allocation authority and two delivery alarms', () => {
    const specs = pacerAlarmSpecs(defaultPacerSettings);
    expect(specs).toHaveLength(24 * 3 + 4);
    expect(specs.find((s) => s.id === 'AllocationAuthorityAge')).toMatchObject({
      metricName: 'AllocationAuthorityAgeSeconds',
      statistic: 'Maximum',
      threshold: 60,
      treatMissingData: 'notBreaching',
    });
    expect(new Set(specs.map((s) => s.id)).size).toBe(specs.length);
    expect(specs.find((s) => s.id === 'PacerStaleParams-5')).toMatchObject({
      threshold: 30_000,
      treatMissingData: 'breaching',
    });
    expect(specs.find((s) => s.id === 'PacerManyLeaders-0')?.threshold).toBe(6);
  });
});

describe('linear baseline and the controller index', () => {
  const plan = resolvePlan(
    { level: 'campaign', accountId: 'a', campaignId: 'c', dailyBudgetMicros: 1_000_000, pacingMode: 'even' },
    'UTC',
  );
  const spend = { initialised: true, confirmedMicros: 0, inFlightMicros: 0, leasedMicros: 0 };

  it('publishes E(t) linear for even and the whole budget for asap, throttle and multiplier 1', () => {
    const c = createLinearController();
    const even = c.step({ plan, day: DAY, spend, nowMs: 43_200_000 }, undefined, undefined);
    expect(evaluateCurve(even.params.curve, 43_200_000)).toBe(500_000);
    expect(even.params).toMatchObject({ throttle: 1, bidMultiplier: 1, budgetMicros: 1_000_000 });
    const asap = c.step(
      { plan: { ...plan, pacingMode: 'asap' }, day: DAY, spend, nowMs: 1 },
      undefined,
      undefined,
    );
    expect(evaluateCurve(asap.params.curve, 1)).toBe(1_000_000);
    // The same curve object every tick (the publisher rewrites curves only when they change).
    expect(c.step({ plan, day: DAY, spend, nowMs: 50_000_000 }, even.state, undefined).params.curve).toBe(
      even.params.curve,
    );
    expect(c.decodeState(c.encodeState(even.state))).toEqual(even.state);
    expect(c.decodeState('garbage')).toBeUndefined();
  });
});
