import { fileURLToPath } from 'node:url';
import { Duration, Fn, RemovalPolicy, Stack, type StackProps } from 'aws-cdk-lib';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import type * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as kinesis from 'aws-cdk-lib/aws-kinesis';
import * as kms from 'aws-cdk-lib/aws-kms';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as ssm from 'aws-cdk-lib/aws-ssm';
import type { Construct } from 'constructs';
import { pacerAlarmSpecs } from '../shared/pacing/alarms.js';
import {
  type AccessContext,
  adServerAccess,
  FUNCTION_TRACING_ACTIVE,
  functionAccess,
  regionEndpoints,
} from '../shared/region/access.js';
import {
  type AlarmSubscriptionKind,
  type DeployedRegion,
  type DeploymentSettings,
  PEER_ENDPOINT_SERVICES,
} from '../shared/region/deployment.js';
import type { ResourceNames } from '../shared/region/names.js';
import {
  type BucketKey,
  type FunctionKey,
  type FunctionSpec,
  functionEnvironment,
  LEADER_OVERRIDE_PATH_PREFIX,
  type RegionDescription,
  type StreamKey,
  type TableKey,
} from '../shared/region/resources.js';
import { pacerScheduleLayout } from '../shared/region/schedule.js';
import { PacelineAdServerAccess } from './constructs/ad-server-access.js';
import { LiveStateCache } from './constructs/cache.js';
import { RegionDashboard } from './constructs/dashboard.js';
import { PrivateNetwork } from './constructs/network.js';
import { PacelineFunction } from './constructs/paceline-function.js';
import { PacerAlarms } from './constructs/pacer-alarms.js';
import { PacerShards } from './constructs/pacer-shards.js';
import { PeerEndpointDns } from './constructs/peer-endpoint-dns.js';
import { RegionPeering } from './constructs/peering.js';
import { dataBuckets, dataStreams, dataTables } from './data-stores.js';
import { acknowledgeGuard, acknowledgeNag } from './nag.js';

const projectRoot = fileURLToPath(new URL('..', import.meta.url)).replace(/\/$/, '');

/** Props of {@link RegionalStack}. */
export interface RegionalStackProps extends StackProps {
  /** The whole deployment (cdk.json context, validated by shared/region/deployment.ts). */
  readonly deployment: DeploymentSettings;
  /** This stack's region in it (its settings, description and network). */
  readonly deployed: DeployedRegion;
}

/** SNS protocol of each kind of alarm subscription (cdk.json `paceline:alarms`). */
const subscriptionProtocol: Record<AlarmSubscriptionKind, sns.SubscriptionProtocol> = {
  email: sns.SubscriptionProtocol.EMAIL,
  sms: sns.SubscriptionProtocol.SMS,
  https: sns.SubscriptionProtocol.HTTPS,
  sqs: sns.SubscriptionProtocol.SQS,
  lambda: sns.SubscriptionProtocol.LAMBDA,
};

/**
 * One Paceline region. Everything it contains is enumerated from the region description
 * (shared/region/resources.ts), the same description the local runner provisions, so the two
 * cannot drift; every physical name comes from the description's names (the deployment's
 * stage), every permission and VPC endpoint from shared/region/access.ts.
 */
export class RegionalStack extends Stack {
  /** Regional tables, or global tables (the primary region's TableV2, imported elsewhere). */
  readonly tables: Record<TableKey, dynamodb.ITable>;
  readonly streams: Record<StreamKey, kinesis.Stream>;
  readonly buckets: Record<BucketKey, s3.Bucket>;
  readonly functions: Record<FunctionKey, PacelineFunction>;
  /** The region description this stack was built from. */
  readonly description: RegionDescription;
  /** The deployment's physical names. */
  readonly names: ResourceNames;
  readonly key: kms.Key;
  readonly network: PrivateNetwork;
  readonly alarmTopic: sns.Topic;
  readonly cache: LiveStateCache;
  readonly adServerAccess: PacelineAdServerAccess;
  readonly dashboard: RegionDashboard;
  /** Pacer alarms that are not per shard (per-shard ones live in {@link pacerShards}). */
  readonly pacerAlarms: PacerAlarms;
  /** Nested stacks of the pacer's shards: rules, leader-override parameters, alarms. */
  readonly pacerShards: PacerShards[];
  /** Where this stack's ARNs point (for shared/region/access.ts). */
  readonly accessContext: AccessContext;
  /** Every region of the deployment, in its order (the first is every plan's allocation home). */
  readonly deploymentRegions: readonly string[];

  constructor(scope: Construct, id: string, props: RegionalStackProps) {
    super(scope, id, props);
    const { deployment, deployed } = props;
    const d = deployed.description;
    this.description = d;
    this.deploymentRegions = deployment.regions.map((r) => r.region);
    const names = d.names;
    this.names = names;
    const peerRegions = deployment.regions.filter((r) => r.region !== deployed.region);
    const isPrimary = deployment.primaryRegion === deployed.region;
    const key = this.dataKey(names);
    this.key = key;
    const network = this.privateNetwork(d, deployment, deployed, peerRegions, key);
    this.network = network;
    const alarmTopic = new sns.Topic(this, 'Alarms', {
      displayName: `Paceline alarms (${names.base}, ${this.region})`,
      masterKey: key,
      enforceSSL: true,
    });
    deployment.alarmSubscriptions.forEach((sub, i) => {
      new sns.Subscription(this, `AlarmSubscription${i}`, {
        topic: alarmTopic,
        protocol: subscriptionProtocol[sub.kind],
        endpoint: sub.endpoint,
        // An SQS queue or function in another region subscribes across regions.
        ...(sub.kind === 'sqs' || sub.kind === 'lambda' ? { region: sub.endpoint.split(':')[3] } : {}),
      });
    });
    this.alarmTopic = alarmTopic;
    const cache = new LiveStateCache(this, 'Cache', {
      vpc: network.vpc,
      clientSecurityGroup: network.functionSecurityGroup,
      key,
      alarmTopic,
      nodeType: d.settings.cache.nodeType,
      shards: d.settings.cache.shards,
      replicasPerShard: d.settings.cache.replicasPerShard,
      port: d.cache.port,
      replicationGroupId: d.cache.replicationGroupId,
      userId: d.cache.userId,
      peerCidrs: peerRegions.map((r) => r.network.cidr),
    });
    acknowledgeNag(
      cache.replicationGroup,
      'AwsSolutions-AEC6',
      'The cache authenticates with IAM (an RBAC user group whose only enabled user has authenticationMode iam; SigV4 tokens signed per role, shared/redis/iam-auth.ts). This cdk-nag rule only recognises a Redis AUTH token (AuthToken), which ElastiCache does not allow together with user groups.',
    );
    this.cache = cache;
    this.tables = dataTables(this, d, key, isPrimary, peerRegions);
    this.streams = dataStreams(this, d, key);
    this.buckets = dataBuckets(this, d, key);
    const prefix = names.parameterPrefix(this.region);
    for (const [paramKey, spec] of Object.entries(d.parameters)) {
      if (spec.path.startsWith(LEADER_OVERRIDE_PATH_PREFIX)) continue; // in the pacer's shard stacks
      new ssm.StringParameter(this, `Parameter-${paramKey}`, {
        parameterName: `${prefix}${spec.path}`,
        stringValue: spec.initial(this.region),
        description: spec.purpose,
      });
    }
    this.accessContext = {
      partition: this.partition,
      account: this.account,
      region: this.region,
      peerRegions: peerRegions.map((r) => r.region),
      bucketArn: (k) => this.buckets[k].bucketArn,
      keyArn: key.keyArn,
    };
    this.functions = this.pacelineFunctions(d, network, key, alarmTopic, cache);
    this.pacerShards = this.pacerShardStacks(d, alarmTopic);
    this.pacerAlarms = new PacerAlarms(this, 'PacerAlarms', {
      specs: pacerAlarmSpecs(d.settings.pacer, d.functions.pacer.name).filter(
        (a) => !('shard' in a.dimensions),
      ),
      alarmTopic,
    });
    this.adServerAccess = new PacelineAdServerAccess(this, 'AdServerAccess', {
      statements: adServerAccess(d, this.accessContext),
      cacheSecurityGroup: cache.securityGroup,
      cachePort: cache.port,
      managedPolicyName: names.adServerPolicyName(this.region),
    });
    this.dashboard = new RegionDashboard(this, 'Dashboard', {
      dashboardName: names.dashboardName(this.region),
      pacerService: d.functions.pacer.name,
      shards: d.settings.pacer.shards,
      streamFunctions: (Object.keys(this.functions) as FunctionKey[]).flatMap((k) => {
        const queue = this.functions[k].onFailureQueue;
        if (!queue) return [];
        return [
          {
            name: d.functions[k].name,
            iteratorAge: this.functions[k].function.metric('IteratorAge', {
              statistic: 'Maximum',
              period: Duration.minutes(1),
            }),
            onFailureDepth: queue.metricApproximateNumberOfMessagesVisible({ period: Duration.minutes(1) }),
          },
        ];
      }),
    });
    this.acknowledgeCdkProviders();
  }

  /**
   * The region's data key (tables, streams, cache, queues, topic, logs), with the alias replica
   * keys of global tables are named by, CloudWatch Logs allowed to use it, and grants only for
   * AWS resources or AWS services (AWS's Control Tower rule CT.KMS.PR.3).
   */
  private dataKey(names: ResourceNames): kms.Key {
    const key = new kms.Key(this, 'Key', {
      description: `Paceline regional data key (${names.base}: tables, streams, cache, queues, logs)`,
      enableKeyRotation: true,
      removalPolicy: RemovalPolicy.RETAIN,
    });
    // CloudWatch Logs must be allowed to use the key for the encrypted log groups.
    key.addToResourcePolicy(
      new iam.PolicyStatement({
        principals: [new iam.ServicePrincipal(`logs.${this.region}.amazonaws.com`)],
        actions: ['kms:Encrypt*', 'kms:Decrypt*', 'kms:ReEncrypt*', 'kms:GenerateDataKey*', 'kms:Describe*'],
        resources: ['*'],
      }),
    );
    // Grants on this key only for AWS resources (DynamoDB, ElastiCache, Lambda create theirs) or by
    // AWS services: nobody hands the key to a principal of their choosing.
    key.addToResourcePolicy(
      new iam.PolicyStatement({
        sid: 'GrantsOnlyForAwsResources',
        effect: iam.Effect.DENY,
        principals: [new iam.AnyPrincipal()],
        actions: ['kms:CreateGrant'],
        resources: ['*'],
        conditions: {
          BoolIfExists: { 'kms:GrantIsForAWSResource': 'false', 'aws:PrincipalIsAWSService': 'false' },
        },
      }),
    );
    // A fixed alias: the primary region's global tables name each replica's key by it (a key ARN
    // of another region's stack cannot be referenced at synth time; the alias ARN can).
    key.addAlias(names.keyAliasName);
    return key;
  }

  /** The VPC, its endpoints (derived from what the functions call), peering and peer DNS. */
  private privateNetwork(
    d: RegionDescription,
    deployment: DeploymentSettings,
    deployed: DeployedRegion,
    peerRegions: readonly DeployedRegion[],
    key: kms.IKey,
  ): PrivateNetwork {
    const endpoints = regionEndpoints(d);
    // Peer pacers call this region's SSM and ElastiCache APIs through its endpoints.
    for (const s of PEER_ENDPOINT_SERVICES)
      if (!endpoints.interface.includes(s))
        throw new Error(
          `RegionalStack: no function calls ${s}, but peer regions reach it through this region.`,
        );
    const network = new PrivateNetwork(this, 'Network', {
      key,
      cidr: deployed.network.cidr,
      flowLogGroupName: d.names.flowLogGroupName,
      gatewayEndpoints: endpoints.gateway,
      interfaceEndpoints: endpoints.interface,
      // Once this region's endpoints are published to the peers (cdk.json `network.endpoints`),
      // the peers resolve this region's APIs to them: admit their CIDRs on 443.
      endpointPeerCidrs: Object.fromEntries(
        Object.keys(deployed.network.endpoints).map((s) => [s, peerRegions.map((r) => r.network.cidr)]),
      ),
    });
    // The earlier region of a pair (cdk.json order) requests the peering.
    const myIndex = deployment.regions.indexOf(deployed);
    new RegionPeering(this, 'Peering', {
      vpc: network.vpc,
      peers: peerRegions.map((peer) => {
        const requestHere = deployment.regions.indexOf(peer) > myIndex;
        return {
          region: peer.region,
          cidr: peer.network.cidr,
          ...(requestHere && peer.network.vpcId ? { requestToVpcId: peer.network.vpcId } : {}),
          ...(!requestHere && deployed.network.peering[peer.region]
            ? { connectionId: deployed.network.peering[peer.region] }
            : {}),
        };
      }),
    });
    // A peer region's SSM and ElastiCache APIs, resolved to its interface endpoints over the
    // peering (the peers' `network.endpoints` in cdk.json; none known: no zone).
    new PeerEndpointDns(this, 'PeerEndpointDns', {
      vpc: network.vpc,
      peers: peerRegions.map((peer) => ({ region: peer.region, endpoints: peer.network.endpoints })),
    });
    const prefix = d.names.parameterPrefix(this.region);
    // Published for the operator filling `network.vpcId` in cdk.json (peering, second deploy).
    new ssm.StringParameter(this, 'VpcIdParameter', {
      parameterName: `${prefix}network/vpc-id`,
      stringValue: network.vpc.vpcId,
      description: "This region's VPC id (for paceline:regions.<region>.network.vpcId in cdk.json)",
    });
    // Published for `network.endpoints.<service>` in cdk.json, ready to paste: the endpoint's
    // first DNS entry (`<hostedZoneId>:<regional dnsName>`, what Route 53 aliases) as JSON.
    for (const service of PEER_ENDPOINT_SERVICES) {
      const entry = Fn.split(
        ':',
        Fn.select(0, (network.interfaceEndpoints[service] as ec2.InterfaceVpcEndpoint).vpcEndpointDnsEntries),
      );
      new ssm.StringParameter(this, `EndpointParameter-${service}`, {
        parameterName: `${prefix}network/endpoints/${service}`,
        stringValue: Fn.join('', [
          '{"dnsName":"',
          Fn.select(1, entry),
          '","hostedZoneId":"',
          Fn.select(0, entry),
          '"}',
        ]),
        description: `This region's ${service} interface endpoint (for paceline:regions.<region>.network.endpoints.${service} in cdk.json)`,
      });
    }
    return network;
  }

  /** One function per description entry, each with its own role holding its described access. */
  private pacelineFunctions(
    d: RegionDescription,
    network: PrivateNetwork,
    key: kms.IKey,
    alarmTopic: sns.ITopic,
    cache: LiveStateCache,
  ): Record<FunctionKey, PacelineFunction> {
    const functions = {} as Record<FunctionKey, PacelineFunction>;
    for (const fnKey of Object.keys(d.functions) as FunctionKey[]) {
      const spec: FunctionSpec = d.functions[fnKey];
      const access = functionAccess(d, fnKey, this.accessContext);
      const fn = new PacelineFunction(this, `Function-${fnKey}`, {
        spec,
        names: d.names,
        entry: `${projectRoot}/${spec.entry}`,
        projectRoot,
        environment: functionEnvironment(spec, {
          region: this.region,
          names: d.names,
          deploymentRegions: this.deploymentRegions,
          tableName: (k) => this.tables[k].tableName,
          streamName: (k) => this.streams[k].streamName,
          bucketName: (k) => this.buckets[k].bucketName,
          redis: {
            nodes: cache.endpoint,
            mode: 'cluster',
            tls: true,
            iam: { userId: d.cache.userId, cacheName: d.cache.replicationGroupId },
          },
        }),
        vpc: network.vpc,
        securityGroup: network.functionSecurityGroup,
        key,
        alarmTopic,
        access,
        activeTracing: FUNCTION_TRACING_ACTIVE,
        ...(spec.source ? { stream: this.streams[spec.source.stream] } : {}),
      });
      // Wildcard resources in the Access policy are narrow families, each acknowledged here with
      // what it covers: a function's own prefix of a bucket, the shards' leader overrides.
      for (const s of access)
        for (const resource of s.resources) {
          if (resource === '*' || !resource.endsWith('*')) continue;
          acknowledgeNag(
            fn.accessPolicy,
            `AwsSolutions-IAM5[Resource::${this.nagResource(resource)}]`,
            s.sid.startsWith('Objects')
              ? `${spec.name} reads/writes only its own dead-letter payloads (keys ${spec.name}/<shard>/<sequence>).`
              : `${spec.name} reads every shard's leader override (${LEADER_OVERRIDE_PATH_PREFIX}<shard>, one per shard, all described); listing up to 256 would pass IAM's inline-policy size limit.`,
          );
        }
      functions[fnKey] = fn;
    }
    return functions;
  }

  /** How cdk-nag writes a resource in a finding id: tokens as `<LogicalId.Attr>`. */
  private nagResource(resource: string): string {
    const resolved = this.resolve(resource) as unknown;
    if (typeof resolved === 'string') return resolved;
    // Fn::Join of [GetAtt, literal]: cdk-nag renders `<LogicalId.Attr>literal`.
    const parts = (resolved as { 'Fn::Join': [string, unknown[]] })['Fn::Join'][1];
    return parts
      .map((p) => {
        if (typeof p === 'string') return p;
        const getAtt = (p as { 'Fn::GetAtt'?: [string, string] })['Fn::GetAtt'];
        if (getAtt) return `<${getAtt[0]}.${getAtt[1]}>`;
        return `<${(p as { Ref: string }).Ref}>`;
      })
      .join('');
  }

  /**
   * The pacer's schedule at scale: nested stacks of up to 64 shards (rules, leader overrides,
   * per-shard alarms), and one invoke permission for every rule by name pattern.
   */
  private pacerShardStacks(d: RegionDescription, alarmTopic: sns.ITopic): PacerShards[] {
    const pacer = this.functions.pacer.function;
    new lambda.CfnPermission(this, 'PacerSchedulePermission', {
      action: 'lambda:InvokeFunction',
      functionName: pacer.functionArn,
      principal: 'events.amazonaws.com',
      sourceAccount: this.account,
      // Every pacer rule of this deployment (names.ts: the pattern matches no other stage's).
      sourceArn: `arn:${this.partition}:events:${this.region}:${this.account}:rule/${d.names.pacerRulePattern}`,
    });
    const prefix = d.names.parameterPrefix(this.region);
    const alarms = pacerAlarmSpecs(d.settings.pacer, d.functions.pacer.name);
    const parameters = Object.entries(d.parameters);
    return pacerScheduleLayout(d.settings.pacer).map((layout) => {
      const shards = new Set(layout.shards.map(String));
      return new PacerShards(this, `PacerShards${layout.index}`, {
        description: `Paceline pacer shards ${layout.shards[0]}–${layout.shards.at(-1)} (${d.names.base}, ${this.region})`,
        layout,
        ruleName: d.names.pacerRuleName,
        pacerFunctionArn: pacer.functionArn,
        shardParameters: parameters
          .filter(
            ([, p]) =>
              p.path.startsWith(LEADER_OVERRIDE_PATH_PREFIX) &&
              shards.has(p.path.slice(LEADER_OVERRIDE_PATH_PREFIX.length)),
          )
          .map(([key, p]) => ({
            key,
            name: `${prefix}${p.path}`,
            value: p.initial(this.region),
            description: p.purpose,
          })),
        alarms: alarms.filter((a) => a.dimensions.shard !== undefined && shards.has(a.dimensions.shard)),
        alarmTopic,
      });
    });
  }

  /**
   * CDK's own custom-resource provider (the VPC's restrictDefaultSecurityGroup: a Lambda run at
   * deploy time that removes the default security group's rules) is not ours to shape: its
   * findings are acknowledged on it, with what it is.
   */
  private acknowledgeCdkProviders(): void {
    const provider = this.node.tryFindChild('Custom::VpcRestrictDefaultSGCustomResourceProvider');
    if (!provider) return;
    const handler = provider.node.tryFindChild('Handler');
    const role = provider.node.tryFindChild('Role');
    if (handler)
      acknowledgeGuard(
        handler,
        'lambda_inside_vpc_check',
        "CDK's deploy-time provider of restrictDefaultSecurityGroup: it only calls the EC2 API (revoke the default group's rules) during deployment; inside this VPC (no internet, no EC2 endpoint) it could not reach that API.",
      );
    if (role)
      acknowledgeNag(
        role,
        'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]',
        "CDK's deploy-time provider of restrictDefaultSecurityGroup: CDK gives its role the AWS-managed basic execution policy (CloudWatch Logs writes, Resource *), not configurable.",
      );
  }
}
