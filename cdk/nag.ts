/**
 * Acknowledging a finding of cdk-nag (AwsSolutions) or of AWS's Control Tower guard rules
 * (cfn-guard, cdk/guard.ts) — always on the construct the finding is about, never on a stack, and
 * always with the reason it is acceptable there. Anything not acknowledged fails synthesis.
 *
 * Both go through CDK's own mechanism, `Validations.of(construct).acknowledge`: cdk-nag 3 reads it
 * for its findings, CDK applies it to every other validation plugin's report (cfn-guard's
 * findings are matched by rule name and by the construct path of the resource). A guard
 * acknowledgement is also written where cfn-guard's own convention keeps it, the resource's
 * `Metadata.guard.SuppressedRules` (what a guard run over the template alone reads), so the
 * template says what is acknowledged.
 */
import { CfnResource, Validations } from 'aws-cdk-lib';
import type { IConstruct } from 'constructs';
import { GUARD_PLUGIN_NAME } from './guard.js';

/**
 * Acknowledges a cdk-nag finding (e.g. `AwsSolutions-SQS3`, `AwsSolutions-IAM5[Resource::*]`) on
 * `scope` and what it contains: pass the resource (or the construct whose default child it is).
 */
export function acknowledgeNag(scope: IConstruct, id: string, reason: string): void {
  Validations.of(scope).acknowledge({ id, reason });
}

/**
 * Acknowledges a Control Tower guard rule (by its rule name, e.g.
 * `s3_bucket_logging_enabled_check`) on one resource: `scope` is the CfnResource or the construct
 * whose default child it is.
 */
export function acknowledgeGuard(scope: IConstruct, rule: string, reason: string): void {
  const resource = CfnResource.isCfnResource(scope) ? scope : scope.node.defaultChild;
  if (!resource || !CfnResource.isCfnResource(resource))
    throw new Error(`acknowledgeGuard: ${scope.node.path} is not a CloudFormation resource.`);
  Validations.of(resource).acknowledge({ id: `${GUARD_PLUGIN_NAME}::${rule}`, reason });
  const metadata = (resource.cfnOptions.metadata ?? {}) as { guard?: { SuppressedRules?: string[] } };
  const rules = new Set([...(metadata.guard?.SuppressedRules ?? []), rule]);
  resource.cfnOptions.metadata = { ...metadata, guard: { ...metadata.guard, SuppressedRules: [...rules] } };
}
