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

  it('needs Redis named explicitly for AWS, and refuses AWS with local endpoints set', () => {
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
    expect(describeTargets(t)).toBe('Target: AWS us-east-1 (redis cfg.cache.amazonaws.com:6379)');
  });

  it('uses a pasted local Client env as the target', () => {
    const env = {
      AWS_REGION: 'us-west-2',
      AWS_ENDPOINT_URL_DYNAMODB: 'http://127.0.0.1:4000',
      AWS_ENDPOINT_URL_SSM: 'http://127.0.0.1:4001',
      REDIS_NODES: '127.0.0.1:6379',
      REDIS_MODE: 'standalone',
    };
    const [t] = resolveTargets({}, env, '/nonexistent');
    expect(t).toMatchObject({ kind: 'local', region: 'us-west-2' });
    expect(describeTargets([t as NonNullable<typeof t>])).toMatch(
      /^Target: local us-west-2 \(dynamodb http:\/\/127\.0\.0\.1:4000, redis 127\.0\.0\.1:6379\)$/,
    );
  });
});
