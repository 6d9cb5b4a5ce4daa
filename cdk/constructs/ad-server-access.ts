import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as iam from 'aws-cdk-lib/aws-iam';
import { Construct } from 'constructs';
import type { AccessStatement } from '../../shared/region/access.js';

/** Props of {@link PacelineAdServerAccess}. */
export interface PacelineAdServerAccessProps {
  /**
   * Everything the ad-server client library does in the region (shared/region/access.ts,
   * `adServerAccess`, resolved for this stack): the policy holds exactly these statements.
   */
  readonly statements: readonly AccessStatement[];
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
 * users attach to their own roles, plus the cache ingress rule for the fleet. The statements come
 * from the region description's `adServer` (shared/region/access.ts): the budgets and ledger
 * actions the client makes, puts on both streams, the pacer shard-count parameter, the key only
 * via DynamoDB and Kinesis of this region, IAM authentication to the cache. No wildcard.
 *
 * The template tests check the policy against the same derivation
 * (test/synth/regional-stack.test.ts).
 */
export class PacelineAdServerAccess extends Construct {
  readonly policy: iam.ManagedPolicy;
  private readonly props: PacelineAdServerAccessProps;

  constructor(scope: Construct, id: string, props: PacelineAdServerAccessProps) {
    super(scope, id);
    this.props = props;
    this.policy = new iam.ManagedPolicy(this, 'Policy', {
      ...(props.managedPolicyName ? { managedPolicyName: props.managedPolicyName } : {}),
      description:
        'Paceline ad-server access: budgets and ledger reads, guard markers, events, shard count, cache connect',
      statements: props.statements.map(
        (s) =>
          new iam.PolicyStatement({
            sid: s.sid,
            actions: [...s.actions],
            resources: [...s.resources],
            ...(s.condition ? { conditions: s.condition as Record<string, unknown> } : {}),
          }),
      ),
    });
    if (props.fleet) this.allowFrom(props.fleet);
  }

  /** Admits a fleet (security group or CIDR) to the cache port. */
  allowFrom(fleet: ec2.IPeer, description = 'Paceline ad servers'): void {
    this.props.cacheSecurityGroup.addIngressRule(fleet, ec2.Port.tcp(this.props.cachePort), description);
  }
}
