/** The paceline CLI's conventions without any store: help, usage errors, target refusal, exit codes. */
import { describe, expect, it } from 'vitest';
import { describeTargets, resolveTargets } from '../../../cli/paceline/target.js';
import { EXIT, main } from '../../../cli/paceline.js';

function io(env: Record<string, string | undefined> = {}) {
  const out: string[] = [];
  const err: string[] = [];
  return {
    out,
    err,
    io: { out: (l: string) => out.push(l), err: (l: string) => err.push(l), env, now: () => 0 },
  };
}

describe('paceline CLI', () => {
  it('prints help with the commands and exit codes', async () => {
    const h = io();
    expect(await main(['--help'], h.io)).toBe(EXIT.ok);
    expect(h.out.join('\n')).toMatch(/status/);
    expect(h.out.join('\n')).toMatch(
      /exit codes: 0 ok, 1 unexpected failure, 2 usage, invalid input or no target chosen/,
    );
    const s = io();
    expect(await main(['status', '--help'], s.io)).toBe(EXIT.ok);
    expect(s.out.join('\n')).toMatch(/--json prints exactly one object/);
  });

  it('refuses without a target, in one line, saying how to choose — never reaching AWS by default', async () => {
    const r = io({ PATH: '/usr/bin' });
    expect(await main(['status', '--json', '--regions', 'nowhere-1'], r.io)).toBe(EXIT.usage);
    expect(r.err).toHaveLength(1);
    expect(r.err[0]).toMatch(/No target|No running local region/);
    expect(r.out).toEqual([]);
  });

  it('rejects unknown commands and flags as usage errors (exit 2, one line)', async () => {
    const u = io();
    expect(await main(['fly'], u.io)).toBe(EXIT.usage);
    expect(u.err[0]).toMatch(/unknown command "fly"/);
    const f = io();
    expect(await main(['status', '--bogus'], f.io)).toBe(EXIT.usage);
    expect(f.err).toHaveLength(1);
  });

  it('needs Redis named explicitly for AWS, and refuses AWS with local endpoints set', async () => {
    expect(() => resolveTargets({ aws: true, regions: 'us-east-1' }, {}, '/nonexistent')).toThrow(
      /REDIS_NODES_US_EAST_1/,
    );
    expect(() =>
      resolveTargets(
        { aws: true, regions: 'us-east-1' },
        { AWS_ENDPOINT_URL_DYNAMODB: 'http://127.0.0.1:1' },
        '/nonexistent',
      ),
    ).toThrow(/local region/);
    const t = resolveTargets(
      { aws: true, regions: 'us-east-1' },
      { REDIS_NODES: 'cfg.cache.amazonaws.com:6379' },
      '/nonexistent',
    );
    expect(t[0]).toMatchObject({ kind: 'aws', region: 'us-east-1', redis: { mode: 'cluster', tls: true } });
    // Every endpoint the command will use, as the SDK resolves it for the region.
    expect(await describeTargets(t)).toBe(
      'Target: AWS us-east-1 (dynamodb https://dynamodb.us-east-1.amazonaws.com, ssm https://ssm.us-east-1.amazonaws.com, ' +
        'redis cfg.cache.amazonaws.com:6379 (TLS), credentials: the default chain)',
    );
    // An override of the SDK's endpoints (global or per service) would send the calls elsewhere.
    for (const name of ['AWS_ENDPOINT_URL', 'AWS_ENDPOINT_URL_SQS']) {
      expect(() =>
        resolveTargets({ aws: true, regions: 'us-east-1' }, { [name]: 'http://10.0.0.1:1' }, '/nonexistent'),
      ).toThrow(new RegExp(`${name} is set`));
    }
    expect(() => resolveTargets({ aws: true }, { REDIS_NODES: 'x:1' }, '/nonexistent')).toThrow(
      /name the regions/,
    );
  });

  it('refuses a partial local environment, naming what is missing, and any non-loopback endpoint', () => {
    const needs = { services: ['dynamodb', 'ssm'] as const, redis: true };
    expect(() =>
      resolveTargets({}, { AWS_ENDPOINT_URL_DYNAMODB: 'http://127.0.0.1:4000' }, '/nonexistent', { needs }),
    ).toThrow(/incomplete for this command: AWS_ENDPOINT_URL_SSM, REDIS_NODES, REDIS_MODE unset/);
    expect(() =>
      resolveTargets({}, { REDIS_NODES: '127.0.0.1:6379', REDIS_MODE: 'standalone' }, '/nonexistent', {
        needs,
      }),
    ).toThrow(/AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL_SSM unset/);
    const remote = {
      AWS_ENDPOINT_URL_DYNAMODB: 'http://127.0.0.1:4000',
      AWS_ENDPOINT_URL_SSM: 'https://ssm.us-east-1.amazonaws.com',
      REDIS_NODES: '127.0.0.1:6379',
      REDIS_MODE: 'standalone',
    };
    expect(() => resolveTargets({}, remote, '/nonexistent', { needs })).toThrow(
      /AWS_ENDPOINT_URL_SSM=https:\/\/ssm.us-east-1.amazonaws.com is not a loopback endpoint/,
    );
    expect(() =>
      resolveTargets(
        {},
        { ...remote, AWS_ENDPOINT_URL_SSM: 'http://[::1]:4001', REDIS_NODES: 'cache.internal:6379' },
        '/nonexistent',
        { needs },
      ),
    ).toThrow(/REDIS_NODES names cache.internal:6379, not a loopback address/);
    // A command that does not use a service does not need its endpoint; the target carries only
    // the services asked for, marked local-only (a client for another one cannot be built).
    const [t] = resolveTargets(
      {},
      { AWS_ENDPOINT_URL_SSM: 'http://localhost:4001', AWS_ENDPOINT_URL_S3: 'http://127.0.0.1:1' },
      '/nonexistent',
      { needs: { services: ['ssm'], redis: false } },
    );
    expect(t?.endpoints).toEqual({ region: 'us-east-1', localOnly: true, ssm: 'http://localhost:4001' });
  });

  it('uses a pasted local Client env as the target', async () => {
    const env = {
      AWS_REGION: 'us-west-2',
      AWS_ENDPOINT_URL_DYNAMODB: 'http://127.0.0.1:4000',
      AWS_ENDPOINT_URL_SSM: 'http://127.0.0.1:4001',
      REDIS_NODES: '127.0.0.1:6379',
      REDIS_MODE: 'standalone',
    };
    const [t] = resolveTargets({}, env, '/nonexistent');
    expect(t).toMatchObject({ kind: 'local', region: 'us-west-2' });
    expect(await describeTargets([t as NonNullable<typeof t>])).toBe(
      'Target: local us-west-2 (dynamodb http://127.0.0.1:4000, ssm http://127.0.0.1:4001, redis 127.0.0.1:6379)',
    );
  });
});
