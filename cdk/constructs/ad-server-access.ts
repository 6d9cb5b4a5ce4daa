import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as kinesis from 'aws-cdk-lib/aws-kinesis';
import type * as kms from 'aws-cdk-lib/aws-kms';
import { Construct } from 'constructs';

/** Props of {@link PacelineAdServerAccess}. */
export interface PacelineAdServerAccessProps {
  /** The streams ad servers put events on (user actions, spend notices). */
  readonly streams: readonly kinesis.IStream[];
  /** The budgets table (read: the guard's plans, the pacing reader's budgets). */
  readonly budgetsTable: dynamodb.ITable;
  /** The spend ledger (the guard's rebuild: Query a campaign-day, PutItem the plan-day start marker). */
  readonly ledgerTable: dynamodb.ITable;
  /** The regional key the streams and tables are encrypted with. */
  readonly key: kms.IKey;
  /** `elasticache:Connect` resources: the replication group and the IAM cache user. */
  readonly cacheConnectArns: readonly string[];
  /** The cache's security group and port (the ingress rule admits the ad servers). */
  readonly cacheSecurityGroup: ec2.ISecurityGroup;
  readonly cachePort: number;
  /**
   * Where the ad-server fleet connects from (its security group, or a CIDR of a peered VPC).
   * @default none — call {@link PacelineAdServerAccess.allowFrom} later
   */
  readonly fleet?: ec2.IPeer;
  /** Managed policy name. @default generated */
  readonly managedPolicyName?: string;
}

/**
 * Everything an ad-server fleet needs to use Paceline, and nothing more, as one managed policy
 * users attach to their own roles, plus the cache ingress rule for the fleet:
 *
 * - `kinesis:PutRecord`, `kinesis:PutRecords` on both streams;
 * - `dynamodb:GetItem`, `dynamodb:BatchGetItem`, `dynamodb:Query` on the budgets table (base
 *   table only: the by-pacer-shard index is the pacer's);
 * - `dynamodb:Query`, `dynamodb:PutItem` on the spend ledger (the guard's rebuild of a
 *   plan-day; it never writes spend entries, track-spend does);
 * - `kms:Decrypt` (reads) and `kms:GenerateDataKey` (encrypted puts) on the regional key, only
 *   via DynamoDB and Kinesis of this region;
 * - `elasticache:Connect` on the cache and its IAM user.
 *
 * The template tests pin these exact actions and resources (test/synth/regional-stack.test.ts).
 */
export class PacelineAdServerAccess extends Construct {
  readonly policy: iam.ManagedPolicy;
  private readonly props: PacelineAdServerAccessProps;

  constructor(scope: Construct, id: string, props: PacelineAdServerAccessProps) {
    super(scope, id);
    this.props = props;
    const region = props.key.env.region;
    this.policy = new iam.ManagedPolicy(this, 'Policy', {
      ...(props.managedPolicyName ? { managedPolicyName: props.managedPolicyName } : {}),
      description: 'Paceline ad-server access: put events, read budgets, guard ledger access, cache connect',
      statements: [
        new iam.PolicyStatement({
          sid: 'PutEvents',
          actions: ['kinesis:PutRecord', 'kinesis:PutRecords'],
          resources: props.streams.map((s) => s.streamArn),
        }),
        new iam.PolicyStatement({
          sid: 'ReadBudgets',
          actions: ['dynamodb:GetItem', 'dynamodb:BatchGetItem', 'dynamodb:Query'],
          resources: [props.budgetsTable.tableArn],
        }),
        new iam.PolicyStatement({
          sid: 'GuardLedger',
          actions: ['dynamodb:Query', 'dynamodb:PutItem'],
          resources: [props.ledgerTable.tableArn],
        }),
        new iam.PolicyStatement({
          sid: 'Key',
          actions: ['kms:Decrypt', 'kms:GenerateDataKey'],
          resources: [props.key.keyArn],
          conditions: {
            StringEquals: {
              'kms:ViaService': [`dynamodb.${region}.amazonaws.com`, `kinesis.${region}.amazonaws.com`],
            },
          },
        }),
        new iam.PolicyStatement({
          sid: 'CacheConnect',
          actions: ['elasticache:Connect'],
          resources: [...props.cacheConnectArns],
        }),
      ],
    });
    if (props.fleet) this.allowFrom(props.fleet);
  }

  /** Admits a fleet (security group or CIDR) to the cache port. */
  allowFrom(fleet: ec2.IPeer, description = 'Paceline ad servers'): void {
    this.props.cacheSecurityGroup.addIngressRule(fleet, ec2.Port.tcp(this.props.cachePort), description);
  }
}
