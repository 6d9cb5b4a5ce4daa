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
});
