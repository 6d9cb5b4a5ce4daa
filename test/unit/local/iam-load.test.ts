/**
 * The policy cache: its key covers every input of the synthesis (the CDK app's whole import
 * graph, the extraction code, cdk.json, the settings), a cached set is read without synthesizing,
 * and a process finding another one synthesizing the same set waits for its result.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { importClosure, loadLocalPolicies, policyInputsHash } from '../../../local/iam/load.js';
import type { LocalPolicySet } from '../../../local/iam/policy.js';
import { tempDir } from '../../support/tmp.js';

const request = { regions: ['us-east-1'], pacer: { shards: 4, instancesPerShard: 3 } };
const fakeSet = (hash: string): LocalPolicySet => ({
  version: 1,
  account: '000000000000',
  synthesis: {
    hash,
    synthMs: 1,
    at: 'now',
    regions: ['us-east-1'],
    primaryRegion: 'us-east-1',
    pacer: request.pacer,
  },
  principals: [],
});

let saved: string | undefined;
beforeEach(() => {
  saved = process.env.PACELINE_IAM_CACHE_DIR;
  process.env.PACELINE_IAM_CACHE_DIR = tempDir('paceline-iam-cache-');
});
afterEach(() => {
  if (saved === undefined) delete process.env.PACELINE_IAM_CACHE_DIR;
  else process.env.PACELINE_IAM_CACHE_DIR = saved;
});

describe('policy cache', () => {
  it('keys on the CDK app’s whole import graph and the extraction code', () => {
    const files = importClosure(['cdk/app.ts', 'local/iam/synth.ts']).map((f) =>
      f.replace(/^.*?\/(cdk|shared|local)\//, '$1/'),
    );
    for (const f of [
      'cdk/regional-stack.ts',
      'cdk/constructs/ad-server-access.ts',
      'cdk/constructs/paceline-function.ts',
      'shared/region/resources.ts',
      'shared/region/deployment.ts',
      'local/iam/template.ts',
      'local/iam/intrinsics.ts',
    ])
      expect(files).toContain(f);
    // Only what the app imports: the spend domain is not an input of the stack.
    expect(files).not.toContain('shared/spend/tracker.ts');
  });

  it('changes with the regions and the pacer layout, and only with them', () => {
    const a = policyInputsHash(request);
    expect(policyInputsHash(request)).toBe(a);
    expect(policyInputsHash({ ...request, regions: ['us-east-1', 'us-west-2'] })).not.toBe(a);
    expect(policyInputsHash({ ...request, pacer: { shards: 5, instancesPerShard: 3 } })).not.toBe(a);
  });

  it('reads a cached set without synthesizing', async () => {
    const hash = policyInputsHash(request);
    const file = join(process.env.PACELINE_IAM_CACHE_DIR as string, `${hash}.json`);
    writeFileSync(file, JSON.stringify(fakeSet(hash)));
    const loaded = await loadLocalPolicies(request);
    expect(loaded).toEqual({ set: fakeSet(hash), cached: true, file });
  });

  it('waits for a live process synthesizing the same set, then reads its result', async () => {
    const hash = policyInputsHash(request);
    const file = join(process.env.PACELINE_IAM_CACHE_DIR as string, `${hash}.json`);
    writeFileSync(`${file}.lock`, String(process.pid));
    setTimeout(() => writeFileSync(file, JSON.stringify(fakeSet(hash))), 500);
    const started = Date.now();
    const loaded = await loadLocalPolicies(request);
    expect(loaded.cached).toBe(true);
    expect(loaded.set.synthesis.hash).toBe(hash);
    expect(Date.now() - started).toBeGreaterThanOrEqual(400);
  });
});
