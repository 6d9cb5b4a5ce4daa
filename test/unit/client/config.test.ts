/**
 * Client configuration from a region's environment: resource names from the region description
 * (or the resource variables), a missing or malformed variable named in the error; metrics
 * snapshots and their differences.
 */
import { describe, expect, it } from 'vitest';
import { configFromEnv } from '../../../shared/client/config.js';
import { buildMetrics, metricsDelta, newCounters } from '../../../shared/client/metrics.js';
import { InvalidEnvError, MissingEnvError } from '../../../shared/config/env.js';

const local = {
  AWS_REGION: 'us-east-1',
  AWS_ENDPOINT_URL_DYNAMODB: 'http://127.0.0.1:1',
  REDIS_NODES: '127.0.0.1:6379',
  REDIS_MODE: 'standalone',
  PACER_SHARDS: '4',
};

describe('configFromEnv', () => {
  it('reads endpoints, Redis, shards and the region description names', () => {
    const c = configFromEnv(local);
    expect(c.endpoints).toMatchObject({ region: 'us-east-1', dynamodb: 'http://127.0.0.1:1' });
    expect(c.redis).toEqual({ mode: 'standalone', nodes: [{ host: '127.0.0.1', port: 6379 }], tls: false });
    expect(c.pacerShards).toBe(4);
    expect(c.resources).toEqual({
      budgetsTable: 'paceline-budgets',
      spendLedgerTable: 'paceline-spend-ledger',
      actionsStream: 'paceline-actions',
      spendStream: 'paceline-spend',
    });
    expect(c.inFlight).toEqual({ ttlMs: 600_000, slotMs: 60_000 });
  });

  it('takes resource variables and overrides; leaves the shard count to SSM when unset', () => {
    const { PACER_SHARDS: _, ...noShards } = local;
    const c = configFromEnv({ ...noShards, SPEND_STREAM: 'my-spend' }, { bidEvents: false });
    expect(c.resources?.spendStream).toBe('my-spend');
    expect(c.bidEvents).toBe(false);
    expect(c.pacerShards).toBeUndefined();
  });

  it('names the variable that is missing or malformed', () => {
    const { REDIS_MODE: _, ...noMode } = local;
    expect(() => configFromEnv(noMode)).toThrow(MissingEnvError);
    expect(() => configFromEnv(noMode)).toThrow(/REDIS_MODE/);
    expect(() => configFromEnv({ ...local, PACER_SHARDS: '0' })).toThrow(InvalidEnvError);
    expect(() => configFromEnv({ ...local, PACER_SHARDS: 'four' })).toThrow(/PACER_SHARDS/);
    expect(() => configFromEnv({ ...local, IN_FLIGHT_TTL_MS: '10m' })).toThrow(/IN_FLIGHT_TTL_MS/);
  });
});

describe('client metrics', () => {
  it('derives the no-budget share and cache hit rate, totals and per interval', () => {
    const c = newCounters();
    const raw = {
      decisions: c.decisions,
      pacingLookups: 0,
      pacingHits: 0,
      pacingFailSafeServes: 0,
      leaseCalls: 0,
      eventsSent: 0,
      eventsFailed: 0,
      errors: 0,
    };
    const empty = buildMetrics(raw);
    expect(empty.noBudgetShare).toBe(0);
    expect(empty.pacingCacheHitRate).toBe(0);
    const a = buildMetrics({
      ...raw,
      decisions: { ...c.decisions, bid: 6, 'no-budget': 2, throttled: 5 },
      pacingLookups: 13,
      pacingHits: 12,
    });
    expect(a.decisions.total).toBe(13);
    expect(a.noBudgetShare).toBe(0.25); // throttled requests never reach the guard
    const b = buildMetrics({
      ...raw,
      decisions: { ...c.decisions, bid: 9, 'no-budget': 5, throttled: 5 },
      pacingLookups: 19,
      pacingHits: 18,
    });
    const d = metricsDelta(a, b);
    expect(d.decisions).toMatchObject({ bid: 3, 'no-budget': 3, throttled: 0, total: 6 });
    expect(d.noBudgetShare).toBe(0.5);
    expect(d.pacingCacheHitRate).toBe(1);
  });
});
