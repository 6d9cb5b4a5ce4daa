import { describe, expect, it } from 'vitest';
import {
  boolEnv,
  InvalidEnvError,
  intEnv,
  MissingEnvError,
  optionalEnv,
  requireEnv,
} from '../../../shared/config/env.js';
import { parseNodes, redisConfigFromEnv } from '../../../shared/redis/connect.js';

describe('env helpers', () => {
  it('requireEnv names the missing variable and where it comes from', () => {
    expect(() => requireEnv('BUDGETS_TABLE', {})).toThrow(MissingEnvError);
    expect(() => requireEnv('BUDGETS_TABLE', { BUDGETS_TABLE: '' })).toThrow(/BUDGETS_TABLE is not set/);
    expect(requireEnv('BUDGETS_TABLE', { BUDGETS_TABLE: 't' })).toBe('t');
  });

  it('optionalEnv falls back on unset or empty', () => {
    expect(optionalEnv('X', 'd', {})).toBe('d');
    expect(optionalEnv('X', 'd', { X: '' })).toBe('d');
    expect(optionalEnv('X', 'd', { X: 'v' })).toBe('v');
    expect(optionalEnv('X', undefined, {})).toBeUndefined();
  });

  it('intEnv and boolEnv reject values they cannot parse, saying what was expected', () => {
    expect(intEnv('N', 7, {})).toBe(7);
    expect(intEnv('N', 7, { N: '42' })).toBe(42);
    expect(() => intEnv('N', 7, { N: '4.2' })).toThrow(InvalidEnvError);
    expect(() => intEnv('N', 7, { N: 'x' })).toThrow(/N="x" is invalid: expected an integer/);
    expect(boolEnv('B', false, { B: 'true' })).toBe(true);
    expect(boolEnv('B', true, { B: '0' })).toBe(false);
    expect(() => boolEnv('B', true, { B: 'yes' })).toThrow(/expected true, false, 1 or 0/);
  });
});

describe('Redis configuration', () => {
  it('parses node lists', () => {
    expect(parseNodes('127.0.0.1:6379, cache.example:6380')).toEqual([
      { host: '127.0.0.1', port: 6379 },
      { host: 'cache.example', port: 6380 },
    ]);
  });

  it('rejects malformed node lists and modes with a clear error', () => {
    expect(() => parseNodes('localhost')).toThrow(/host:port/);
    expect(() => parseNodes('h:0')).toThrow(InvalidEnvError);
    expect(() => redisConfigFromEnv({ REDIS_MODE: 'sharded', REDIS_NODES: 'h:1' })).toThrow(
      /standalone.*cluster/,
    );
    expect(() => redisConfigFromEnv({ REDIS_MODE: 'cluster' })).toThrow(/REDIS_NODES is not set/);
    expect(redisConfigFromEnv({ REDIS_MODE: 'cluster', REDIS_NODES: 'h:1', REDIS_TLS: 'true' })).toEqual({
      mode: 'cluster',
      nodes: [{ host: 'h', port: 1 }],
      tls: true,
    });
  });
});
