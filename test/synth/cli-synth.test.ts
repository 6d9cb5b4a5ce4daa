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
