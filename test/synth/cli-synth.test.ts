import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../support/tmp.js';

const root = fileURLToPath(new URL('../..', import.meta.url));

describe('npm run synth', () => {
  it('synthesizes every regional stack offline, without AWS credentials', () => {
    const out = tempDir('paceline-cli-synth-');
    const env: NodeJS.ProcessEnv = { ...process.env, AWS_PROFILE: 'paceline-nonexistent' };
    for (const k of Object.keys(env)) if (k.startsWith('AWS_') && k !== 'AWS_PROFILE') delete env[k];
    const result = spawnSync('npm', ['run', 'synth', '--', '--output', out], {
      cwd: root,
      env,
      encoding: 'utf8',
      timeout: 170_000,
    });
    expect(result.status, `${result.stdout}\n${result.stderr}`).toBe(0);
    const manifest = JSON.parse(readFileSync(join(out, 'manifest.json'), 'utf8')) as {
      artifacts: Record<string, { type: string }>;
    };
    const stacks = Object.entries(manifest.artifacts)
      .filter(([, a]) => a.type === 'aws:cloudformation:stack')
      .map(([id]) => id);
    expect(stacks.sort()).toEqual(['Paceline-us-east-1', 'Paceline-us-west-2']);
    for (const id of stacks) expect(existsSync(join(out, `${id}.template.json`))).toBe(true);
  });

  /** Runs the app as the cdk CLI would with `context`; returns its exit code and stderr lines. */
  function runApp(context: Record<string, unknown>): { status: number | null; lines: string[] } {
    const result = spawnSync(process.execPath, ['--import', 'tsx', 'cdk/app.ts'], {
      cwd: root,
      env: {
        ...process.env,
        CDK_CONTEXT_JSON: JSON.stringify(context),
        CDK_OUTDIR: tempDir('paceline-bad-ctx-'),
      },
      encoding: 'utf8',
      timeout: 120_000,
    });
    return { status: result.status, lines: result.stderr.trim().split('\n') };
  }
  const base = () =>
    JSON.parse(readFileSync(join(root, 'cdk.json'), 'utf8')).context as Record<string, unknown>;

  it.each([
    [
      'pacer shards 0',
      { 'paceline:pacerShards': '0' },
      /^cdk\.json context paceline:pacerShards: pacer shards = 0: give a whole number from 1 to 256\./,
    ],
    [
      'pacer shards 100000',
      { 'paceline:pacerShards': '100000' },
      /^cdk\.json context paceline:pacerShards: pacer shards = 100000: give a whole number from 1 to 256\./,
    ],
    [
      'stream shards 0',
      { 'paceline:defaults': { streams: { actions: { shards: 0 } } } },
      /^cdk\.json context paceline:defaults\.streams\.actions\.shards: streams actions\.shards = 0: give a whole number from 1 to 10000/,
    ],
    [
      'stream shards 100000',
      { 'paceline:defaults': { streams: { spend: { shards: 100000 } } } },
      /^cdk\.json context paceline:defaults\.streams\.spend\.shards: streams spend\.shards = 100000: give a whole number from 1 to 10000/,
    ],
    [
      'a stage name with spaces',
      { 'paceline:stage': 'my stage' },
      /^cdk\.json context paceline:stage: "my stage": give 1–12 lowercase letters, digits or single hyphens/,
    ],
    [
      'an unknown subscription kind',
      { 'paceline:alarms': { subscriptions: [{ kind: 'pager', endpoint: 'ops' }] } },
      /^cdk\.json context paceline:alarms\.subscriptions\[0\]\.kind: "pager": give one of email, sms, https, sqs, lambda\./,
    ],
  ])('%s fails synth with exit 2 and one line naming the key', (_name, change, message) => {
    const { status, lines } = runApp({ ...base(), ...change });
    expect(status, lines.join('\n')).toBe(2);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(message);
  });

  it('a malformed context value exits 2 with one line naming the key, before any bundling', () => {
    const context = JSON.parse(readFileSync(join(root, 'cdk.json'), 'utf8')).context as {
      'paceline:regions': Record<string, { network: Record<string, unknown> }>;
    };
    (context['paceline:regions']['us-west-2'] as { network: Record<string, unknown> }).network.endpoints = {
      elasticache: {
        dnsName: 'vpce-0fedcba9876543210-zz99yy88.elasticache.us-west-2.vpce.amazonaws.com',
        hostedZoneId: '',
      },
    };
    // What the cdk CLI does with cdk.json: the app reads its context from CDK_CONTEXT_JSON.
    const result = spawnSync(process.execPath, ['--import', 'tsx', 'cdk/app.ts'], {
      cwd: root,
      env: {
        ...process.env,
        CDK_CONTEXT_JSON: JSON.stringify(context),
        CDK_OUTDIR: tempDir('paceline-bad-ctx-'),
      },
      encoding: 'utf8',
      timeout: 120_000,
    });
    expect(result.status, result.stderr).toBe(2);
    const lines = result.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      /^cdk\.json context paceline:regions\.us-west-2\.network\.endpoints\.elasticache\.hostedZoneId: "" is not a Route 53 hosted zone id/,
    );
  });
});
