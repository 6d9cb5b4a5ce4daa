import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../cdk/app.js';
import type { RegionalStack } from '../../cdk/regional-stack.js';
import { tempDir } from '../support/tmp.js';
import { cdkJson, regionTemplates, roleStatements, scheduledTargets } from './support.js';

/** CloudFormation's limits: resources per stack, template body size (from S3). */
const MAX_RESOURCES = 500;
const MAX_TEMPLATE_BYTES = 1_000_000;
/** IAM's limit on the inline policies of one role, characters without whitespace. */
const MAX_ROLE_INLINE_POLICY_CHARS = 10_240;

const SHARDS = 256;
const INSTANCES = 3;

let stacks: RegionalStack[];
let outdir: string;
beforeAll(() => {
  outdir = tempDir('paceline-scale-');
  const app = new App({
    // No bundling: the layout is under test, not the code (`aws:cdk:bundling-stacks` empty).
    context: {
      ...cdkJson.context,
      'paceline:pacerShards': String(SHARDS),
      'paceline:pacerInstancesPerShard': String(INSTANCES),
      'aws:cdk:bundling-stacks': [],
    },
    outdir,
  });
  ({ stacks } = buildApp(app));
  // cdk-nag and the Control Tower guard rules pass at this size too.
  app.synth();
});

describe(`${SHARDS} pacer shards × ${INSTANCES} instances per region`, () => {
  it('schedules every (shard, instance) exactly once, with its constant input', () => {
    for (const stack of stacks) {
      const targets = scheduledTargets(regionTemplates(stack));
      const expected = stack.description.functions.pacer.schedule.instances.map((i) =>
        JSON.stringify(i.input),
      );
      expect(expected).toHaveLength(SHARDS * INSTANCES);
      expect(targets.map((t) => t.input).sort()).toEqual(expected.sort());
      expect(new Set(targets.map((t) => t.input)).size).toBe(SHARDS * INSTANCES);
      expect(targets.every((t) => t.retries === 0 && t.schedule === 'rate(1 minute)')).toBe(true);
      // Under EventBridge's default 300 rules per bus (the sweeper's rule included).
      expect(new Set(targets.map((t) => t.rule)).size + 1).toBeLessThanOrEqual(300);
    }
  });

  it("keeps every stack under CloudFormation's 500 resources and 1 MB template", () => {
    for (const stack of stacks) {
      const all = [stack, ...stack.pacerShards];
      expect(all.length).toBe(1 + SHARDS / 64);
      for (const s of all) {
        const file = join(outdir, s.templateFile);
        const resources = Object.keys(
          (JSON.parse(readFileSync(file, 'utf8')) as { Resources: object }).Resources,
        ).length;
        expect(resources, s.templateFile).toBeLessThan(MAX_RESOURCES);
        expect(statSync(file).size, s.templateFile).toBeLessThan(MAX_TEMPLATE_BYTES);
      }
    }
  });

  it("keeps the pacer's inline policies under IAM's per-role limit and a leader-override parameter per shard", () => {
    for (const stack of stacks) {
      const t = Template.fromStack(stack);
      const role = stack.getLogicalId(stack.functions.pacer.role.node.defaultChild as never);
      const chars = JSON.stringify(stack.resolve(roleStatements(t, role))).replace(/\s/g, '').length;
      expect(chars).toBeLessThan(MAX_ROLE_INLINE_POLICY_CHARS);
      const overrides = regionTemplates(stack).flatMap((n) =>
        Object.values(n.findResources('AWS::SSM::Parameter'))
          .map((p) => p.Properties.Name as string)
          .filter((name) => name.includes('/pacer/leader-override/')),
      );
      expect(new Set(overrides).size).toBe(SHARDS);
    }
  });
});
