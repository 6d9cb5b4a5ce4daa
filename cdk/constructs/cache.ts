import { ArnFormat, Duration, Stack } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as actions from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as elasticache from 'aws-cdk-lib/aws-elasticache';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as kms from 'aws-cdk-lib/aws-kms';
import type * as sns from 'aws-cdk-lib/aws-sns';
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
  /** Replication group id: the host part of IAM auth tokens, found by DescribeReplicationGroups. */
  readonly replicationGroupId: string;
  /** The IAM-authenticated user clients connect as (user id = user name, as IAM auth requires). */
  readonly userId: string;
  /**
   * Peer regions' VPC CIDRs allowed to connect (their pacers publish here after a failover;
   * reached over VPC peering). @default none
   */
  readonly peerCidrs?: readonly string[];
  /** Where the memory alarms notify. */
  readonly alarmTopic: sns.ITopic;
  /** Alarm when any node uses more than this share of its maxmemory, percent. @default 75 */
  readonly memoryAlarmPercent?: number;
}

/**
 * The region's ElastiCache (Valkey) replication group in cluster mode: pacing parameters, live
 * spend counters, user-action events. TLS required in transit, KMS at rest, reachable only
 * from the functions' security group (and peer regions' VPCs, for a failover publisher).
 *
 * Authentication is IAM (no password exists anywhere): the group's only enabled user is
 * `userId` with `authenticationMode: iam`; a client proves its role with a SigV4-signed,
 * 15-minute token (shared/redis/iam-auth.ts) and needs `elasticache:Connect` on the group and
 * the user ({@link LiveStateCache.grantConnect}). The `default` user every Redis-engine user
 * group must contain is disabled (`off`, no commands).
 *
 * Nothing is evicted silently: the parameter group sets `maxmemory-policy noeviction` (the engine
 * default would evict any key, e.g. one key of a plan-day's group), so a full cache refuses
 * writes — which the functions retry and the spend outbox repairs — and the memory alarms fire
 * well before that (DatabaseMemoryUsagePercentage of every node, and any eviction at all).
 */
export class LiveStateCache extends Construct {
  /** `host:port` of the cluster configuration endpoint (the value of `REDIS_NODES`). */
  readonly endpoint: string;
  readonly replicationGroup: elasticache.CfnReplicationGroup;
  readonly parameterGroup: elasticache.CfnParameterGroup;
  /** Memory usage and eviction alarms over every node of the group. */
  readonly memoryAlarms: readonly cloudwatch.Alarm[];
  /** The cache's security group (ingress only on the cache port). */
  readonly securityGroup: ec2.SecurityGroup;
  /** The cache port. */
  readonly port: number;
  /** The IAM-authenticated user. */
  readonly user: elasticache.CfnUser;
  /** The replication group id (same in every region). */
  readonly replicationGroupId: string;

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
    for (const cidr of props.peerCidrs ?? []) {
      securityGroup.addIngressRule(ec2.Peer.ipv4(cidr), ec2.Port.tcp(port), `Peer region pacers (${cidr})`);
    }
    this.securityGroup = securityGroup;
    this.port = port;
    this.replicationGroupId = props.replicationGroupId;
    this.user = new elasticache.CfnUser(this, 'User', {
      engine: 'valkey',
      userId: props.userId,
      userName: props.userId,
      authenticationMode: { Type: 'iam' },
      // Every command on every key: the functions own the whole keyspace (counting, spend,
      // pacing parameters); dangerous admin commands stay out.
      accessString: 'on ~* &* +@all -@dangerous',
    });
    const defaultUser = new elasticache.CfnUser(this, 'DefaultUser', {
      engine: 'valkey',
      userId: `${props.userId}-default-off`,
      userName: 'default',
      noPasswordRequired: true,
      // Disabled, no commands: the group must contain a `default` user, nobody may use it.
      accessString: 'off -@all',
    });
    const userGroup = new elasticache.CfnUserGroup(this, 'UserGroup', {
      engine: 'valkey',
      userGroupId: `${props.userId}-group`,
      userIds: [defaultUser.userId, this.user.userId],
    });
    userGroup.addResourceDependency(this.user);
    userGroup.addResourceDependency(defaultUser);
    this.parameterGroup = new elasticache.CfnParameterGroup(this, 'Parameters', {
      cacheParameterGroupFamily: 'valkey8',
      description: 'Paceline: cluster mode, never evict (a full cache refuses writes instead)',
      properties: { 'cluster-enabled': 'yes', 'maxmemory-policy': 'noeviction' },
    });
    this.replicationGroup = new elasticache.CfnReplicationGroup(this, 'ReplicationGroup', {
      replicationGroupId: props.replicationGroupId,
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
      cacheParameterGroupName: this.parameterGroup.ref,
      userGroupIds: [userGroup.ref],
    });
    this.replicationGroup.addResourceDependency(userGroup);
    this.replicationGroup.addResourceDependency(subnets);
    this.replicationGroup.addResourceDependency(this.parameterGroup);
    this.memoryAlarms = this.alarms(props);
    this.endpoint = `${this.replicationGroup.attrConfigurationEndPointAddress}:${this.replicationGroup.attrConfigurationEndPointPort}`;
  }

  /**
   * Lets `grantee` connect with IAM auth as the cache user, to this region's cache and, for a
   * failover publisher, to the same-named caches of `peerRegions` (exact ARNs, no wildcard).
   */
  grantConnect(grantee: iam.IGrantable, peerRegions: readonly string[] = []): iam.Grant {
    return iam.Grant.addToPrincipal({
      grantee,
      actions: ['elasticache:Connect'],
      resourceArns: this.connectArns(peerRegions),
    });
  }

  /** ARNs `elasticache:Connect` needs: the replication group and the user, per region. */
  connectArns(peerRegions: readonly string[] = []): string[] {
    const stack = Stack.of(this);
    return [stack.region, ...peerRegions].flatMap((region) => [
      stack.formatArn({
        service: 'elasticache',
        region,
        resource: 'replicationgroup',
        resourceName: this.replicationGroupId,
        arnFormat: ArnFormat.COLON_RESOURCE_NAME,
      }),
      stack.formatArn({
        service: 'elasticache',
        region,
        resource: 'user',
        resourceName: this.user.userId,
        arnFormat: ArnFormat.COLON_RESOURCE_NAME,
      }),
    ]);
  }

  /**
   * ElastiCache reports per node (`<group>-<shard 4 digits>-<node 3 digits>`); one math
   * expression takes the maximum over all of them, so one alarm covers the group.
   */
  private alarms(props: LiveStateCacheProps): cloudwatch.Alarm[] {
    const shards = props.shards ?? 3;
    const nodes = (props.replicasPerShard ?? 1) + 1;
    const group = this.replicationGroup.ref;
    const perNode = (metricName: string, statistic: string) => {
      const metrics: Record<string, cloudwatch.IMetric> = {};
      for (let s = 1; s <= shards; s++) {
        for (let n = 1; n <= nodes; n++) {
          metrics[`n${s}x${n}`] = new cloudwatch.Metric({
            namespace: 'AWS/ElastiCache',
            metricName,
            statistic,
            period: Duration.minutes(1),
            dimensionsMap: {
              CacheClusterId: `${group}-${String(s).padStart(4, '0')}-${String(n).padStart(3, '0')}`,
            },
          });
        }
      }
      return metrics;
    };
    const ids = Object.keys(perNode('Evictions', 'Sum'));
    const alarm = (
      id: string,
      fn: 'MAX' | 'SUM',
      metricName: string,
      statistic: string,
      threshold: number,
      evaluationPeriods: number,
      alarmDescription: string,
    ) => {
      const a = new cloudwatch.Alarm(this, id, {
        alarmDescription,
        metric: new cloudwatch.MathExpression({
          expression: `${fn}([${ids.join(',')}])`,
          usingMetrics: perNode(metricName, statistic),
          period: Duration.minutes(1),
          label: `${fn.toLowerCase()} ${metricName}`,
        }),
        threshold,
        evaluationPeriods,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      });
      a.addAlarmAction(new actions.SnsAction(props.alarmTopic));
      return a;
    };
    return [
      alarm(
        'MemoryAlarm',
        'MAX',
        'DatabaseMemoryUsagePercentage',
        'Maximum',
        props.memoryAlarmPercent ?? 75,
        3,
        'Cache memory high on a node: at 100 % (noeviction) writes are refused; scale the node type or shards.',
      ),
      alarm(
        'EvictionsAlarm',
        'SUM',
        'Evictions',
        'Sum',
        1,
        1,
        'The cache evicted keys although its policy is noeviction: check the parameter group.',
      ),
    ];
  }
}
