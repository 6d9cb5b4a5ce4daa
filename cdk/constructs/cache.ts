import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as elasticache from 'aws-cdk-lib/aws-elasticache';
import type * as kms from 'aws-cdk-lib/aws-kms';
import { Construct } from 'constructs';

/** Props of {@link LiveStateCache}. */
export interface LiveStateCacheProps {
  readonly vpc: ec2.IVpc;
  /** Security group allowed to connect (the functions'). */
  readonly clientSecurityGroup: ec2.ISecurityGroup;
  readonly key: kms.IKey;
  /** @default 'cache.r7g.large' */
  readonly nodeType?: string;
  /** Shards (node groups). @default 3 */
  readonly shards?: number;
  /** Replicas per shard; ≥ 1 gives automatic failover. @default 1 */
  readonly replicasPerShard?: number;
  /** Non-default port (AwsSolutions-AEC5). @default 6380 */
  readonly port?: number;
}

/**
 * The region's ElastiCache (Valkey) replication group in cluster mode: pacing parameters, live
 * spend counters, user-action events. TLS required in transit, KMS at rest, reachable only
 * from the functions' security group.
 */
export class LiveStateCache extends Construct {
  /** `host:port` of the cluster configuration endpoint (the value of `REDIS_NODES`). */
  readonly endpoint: string;
  readonly replicationGroup: elasticache.CfnReplicationGroup;

  constructor(scope: Construct, id: string, props: LiveStateCacheProps) {
    super(scope, id);
    const port = props.port ?? 6380;
    const subnets = new elasticache.CfnSubnetGroup(this, 'Subnets', {
      description: 'Paceline cache subnets (isolated)',
      subnetIds: props.vpc.selectSubnets({ subnetType: ec2.SubnetType.PRIVATE_ISOLATED }).subnetIds,
    });
    const securityGroup = new ec2.SecurityGroup(this, 'SecurityGroup', {
      vpc: props.vpc,
      description: 'Paceline cache: only the functions may connect',
      allowAllOutbound: false,
    });
    securityGroup.addIngressRule(props.clientSecurityGroup, ec2.Port.tcp(port), 'Paceline functions');
    this.replicationGroup = new elasticache.CfnReplicationGroup(this, 'ReplicationGroup', {
      replicationGroupDescription: 'Paceline live state (pacing parameters, spend, action counts)',
      engine: 'valkey',
      engineVersion: '8.0',
      cacheNodeType: props.nodeType ?? 'cache.r7g.large',
      clusterMode: 'enabled',
      numNodeGroups: props.shards ?? 3,
      replicasPerNodeGroup: props.replicasPerShard ?? 1,
      automaticFailoverEnabled: true,
      multiAzEnabled: true,
      port,
      transitEncryptionEnabled: true,
      transitEncryptionMode: 'required',
      atRestEncryptionEnabled: true,
      kmsKeyId: props.key.keyArn,
      cacheSubnetGroupName: subnets.ref,
      securityGroupIds: [securityGroup.securityGroupId],
      snapshotRetentionLimit: 1,
    });
    this.replicationGroup.addResourceDependency(subnets);
    this.endpoint = `${this.replicationGroup.attrConfigurationEndPointAddress}:${this.replicationGroup.attrConfigurationEndPointPort}`;
  }
}
