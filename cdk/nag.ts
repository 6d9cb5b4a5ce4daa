/**
 * Every cdk-nag (AwsSolutions) finding Paceline accepts, with its reason, in one place. Anything
 * not acknowledged here fails synthesis.
 */
import { type CfnResource, type Stack, Validations } from 'aws-cdk-lib';
import type * as s3 from 'aws-cdk-lib/aws-s3';

/** Acknowledges the justified findings of a regional stack. */
export function acknowledgeFindings(stack: Stack): void {
  const ack = (id: string, reason: string) => Validations.of(stack).acknowledge({ id, reason });
  ack(
    'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]',
    'AWS-managed basic execution role: CloudWatch Logs write only, scoped by AWS to the function log stream.',
  );
  ack(
    'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole]',
    'Required for Lambda in a VPC to manage its ENIs; AWS-managed and limited to ec2 network-interface actions.',
  );
  ack(
    'AwsSolutions-IAM5[Action::kms:GenerateDataKey*]',
    'Emitted by CDK grant helpers for the one regional KMS key (encrypted tables, stream, queue); resource is that key only.',
  );
  ack(
    'AwsSolutions-IAM5[Action::kms:ReEncrypt*]',
    'Emitted by CDK grant helpers for the one regional KMS key; resource is that key only.',
  );
  ack(
    'AwsSolutions-IAM5[Resource::*]',
    'X-Ray PutTraceSegments/PutTelemetryRecords (active tracing) do not support resource-level permissions.',
  );
  ack(
    'AwsSolutions-KDS3',
    'Streams are encrypted with the customer-managed regional key (rotation on), stronger than the aws/kinesis key the rule prefers.',
  );
  ack(
    'AwsSolutions-EC23',
    'Only the VPC interface endpoints security groups: CDK allows 443 from the VPC CIDR (an intrinsic the rule cannot evaluate); the VPC has no internet path.',
  );
  ack(
    'AwsSolutions-AEC6',
    'The cache authenticates with IAM (an RBAC user group whose only enabled user has authenticationMode iam; SigV4 tokens signed per role, shared/redis/iam-auth.ts). This cdk-nag rule only recognises a Redis AUTH token (AuthToken), which ElastiCache does not allow together with user groups.',
  );
  ack(
    'AwsSolutions-S1',
    'Dead-letter payload bucket: written only by the stream functions (each under its own prefix), read by operators replaying letters; object access is audited with CloudTrail data events, which need no second bucket to guard the first.',
  );
  ack(
    'AwsSolutions-SQS3',
    'The queue IS the on-failure destination (a dead-letter store) of a Kinesis event source; a DLQ of a DLQ adds nothing.',
  );
}

/**
 * A function's object access under its own key prefix of a bucket (`<bucket>/<prefix>/*`): the
 * objects are named by stream position, so the prefix is the narrowest resource there is.
 */
export function acknowledgeObjectPrefix(stack: Stack, bucket: s3.IBucket, prefix: string): void {
  const logicalId = stack.getLogicalId(bucket.node.defaultChild as CfnResource);
  Validations.of(stack).acknowledge({
    id: `AwsSolutions-IAM5[Resource::<${logicalId}.Arn>/${prefix}/*]`,
    reason: `${prefix} writes/reads only its own dead-letter payloads (keys ${prefix}/<shard>/<sequence>).`,
  });
}
