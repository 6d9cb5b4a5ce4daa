import { fileURLToPath } from 'node:url';
import { ArnFormat, Duration, Fn, RemovalPolicy, Stack, type StackProps } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as kinesis from 'aws-cdk-lib/aws-kinesis';
import * as kms from 'aws-cdk-lib/aws-kms';
import * as s3 from 'aws-cdk-lib/aws-s3';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as ssm from 'aws-cdk-lib/aws-ssm';
import type { Construct } from 'constructs';
import { pacerAlarmSpecs } from '../shared/pacing/alarms.js';
import {
  type DeployedRegion,
  type DeploymentSettings,
  PEER_ENDPOINT_SERVICES,
  type PeerEndpointService,
} from '../shared/region/deployment.js';
import {
  type BucketKey,
  cacheIdentity,
  type FunctionKey,
  type FunctionSpec,
  functionEnvironment,
  type IndexSpec,
  isGlobal,
  type KeyType,
  parameterPrefix,
  physicalName,
  type RegionDescription,
  regionDescription,
  type StreamKey,
  type TableAccess,
  type TableKey,
  type TableSpec,
} from '../shared/region/resources.js';
import { PacelineAdServerAccess } from './constructs/ad-server-access.js';
import { LiveStateCache } from './constructs/cache.js';
import { RegionDashboard } from './constructs/dashboard.js';
import { PrivateNetwork } from './constructs/network.js';
import { PacelineFunction } from './constructs/paceline-function.js';
import { PacerAlarms } from './constructs/pacer-alarms.js';
import { PeerEndpointDns } from './constructs/peer-endpoint-dns.js';
import { RegionPeering } from './constructs/peering.js';
import { acknowledgeFindings, acknowledgeObjectPrefix } from './nag.js';

const projectRoot = fileURLToPath(new URL('..', import.meta.url)).replace(/\/$/, '');

/** Props of {@link RegionalStack}. */
export interface RegionalStackProps extends StackProps {
  /** The whole deployment (cdk.json context, validated by shared/region/deployment.ts). */
  readonly deployment: DeploymentSettings;
  /** This stack's region in it (its settings, description and network). */
  readonly deployed: DeployedRegion;
}

const attributeType: Record<KeyType, dynamodb.AttributeType> = {
  S: dynamodb.AttributeType.STRING,
  N: dynamodb.AttributeType.NUMBER,
  B: dynamodb.AttributeType.BINARY,
};

/**
 * One Paceline region. Everything it contains is enumerated from `shared/region/resources.ts`,
 * the same description the local runner provisions, so the two cannot drift.
 */
export class RegionalStack extends Stack {
  /** Regional tables, or global tables (the primary region's TableV2, imported elsewhere). */
  readonly tables: Record<TableKey, dynamodb.ITable>;
  readonly streams: Record<StreamKey, kinesis.Stream>;
  readonly buckets: Record<BucketKey, s3.Bucket>;
  readonly functions: Record<FunctionKey, PacelineFunction>;
  /** The region description this stack was built from. */
  readonly description: RegionDescription;
  readonly cache: LiveStateCache;
  readonly adServerAccess: PacelineAdServerAccess;
  readonly dashboard: RegionDashboard;
  readonly pacerAlarms: PacerAlarms;

  constructor(scope: Construct, id: string, props: RegionalStackProps) {
    super(scope, id, props);
    const { deployment, deployed } = props;
    const regionResources = regionDescription(deployed.settings);
    this.description = regionResources;
    const peerRegions = deployment.regions.filter((r) => r.region !== deployed.region);
    const isPrimary = deployment.primaryRegion === deployed.region;
    const key = new kms.Key(this, 'Key', {
      description: 'Paceline regional data key (tables, streams, cache, queues, logs)',
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
    // A fixed alias: the primary region's global tables name each replica's key by it (a key ARN
    // of another region's stack cannot be referenced at synth time; the alias ARN can).
    key.addAlias(`alias/${regionalKeyAliasName}`);
    const network = new PrivateNetwork(this, 'Network', {
      key,
      cidr: deployed.network.cidr,
      // SSM (parameters, the publisher switch) and ElastiCache (the pacer discovers cache
      // endpoints with DescribeReplicationGroups): also what peer pacers call here.
      interfaceEndpoints: PEER_ENDPOINT_SERVICES.map((s) => peerEndpointService[s]),
      // Once this region's endpoints are published to the peers (cdk.json `network.endpoints`),
      // the peers resolve this region's APIs to them: admit their CIDRs on 443.
      endpointPeerCidrs: Object.fromEntries(
        Object.keys(deployed.network.endpoints).map((s) => [s, peerRegions.map((r) => r.network.cidr)]),
      ),
    });
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
    // Published for the operator filling `network.vpcId` in cdk.json (peering, second deploy).
    new ssm.StringParameter(this, 'VpcIdParameter', {
      parameterName: `${parameterPrefix(this.region)}network/vpc-id`,
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
        parameterName: `${parameterPrefix(this.region)}network/endpoints/${service}`,
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
    const alarmTopic = new sns.Topic(this, 'Alarms', {
      displayName: 'Paceline alarms',
      masterKey: key,
      enforceSSL: true,
    });
    const cache = new LiveStateCache(this, 'Cache', {
      vpc: network.vpc,
      clientSecurityGroup: network.functionSecurityGroup,
      key,
      alarmTopic,
      nodeType: regionResources.settings.cache.nodeType,
      shards: regionResources.settings.cache.shards,
      replicasPerShard: regionResources.settings.cache.replicasPerShard,
      port: cacheIdentity.port,
      replicationGroupId: cacheIdentity.replicationGroupId,
      userId: cacheIdentity.userId,
      peerCidrs: peerRegions.map((r) => r.network.cidr),
    });
    this.cache = cache;

    const tables = {} as Record<TableKey, dynamodb.ITable>;
    for (const [tableKey, spec] of Object.entries(regionResources.tables) as [
      TableKey,
      (typeof regionResources.tables)[TableKey],
    ][]) {
      if (isGlobal(spec)) {
        tables[tableKey] = isPrimary
          ? this.globalTable(tableKey, spec, key, peerRegions)
          : // Global tables are owned by the primary region's stack (its replicas are here);
            // this stack refers to the local replica by name, encrypted with this region's key.
            dynamodb.TableV2.fromTableAttributes(this, `Table-${tableKey}`, {
              tableName: physicalName(spec.suffix),
              encryptionKey: key,
            });
        continue;
      }
      const table = new dynamodb.Table(this, `Table-${tableKey}`, {
        tableName: physicalName(spec.suffix),
        partitionKey: { name: spec.partitionKey.name, type: attributeType[spec.partitionKey.type] },
        sortKey: { name: spec.sortKey.name, type: attributeType[spec.sortKey.type] },
        billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
        encryption: dynamodb.TableEncryption.CUSTOMER_MANAGED,
        encryptionKey: key,
        pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
        deletionProtection: true,
        removalPolicy: RemovalPolicy.RETAIN,
        ...('ttlAttribute' in spec ? { timeToLiveAttribute: spec.ttlAttribute } : {}),
      });
      for (const index of 'indexes' in spec ? spec.indexes : [])
        table.addGlobalSecondaryIndex(indexProps(index));
      tables[tableKey] = table;
    }
    this.tables = tables;

    const streams = {} as Record<StreamKey, kinesis.Stream>;
    for (const [streamKey, spec] of Object.entries(regionResources.streams) as [
      StreamKey,
      (typeof regionResources.streams)[StreamKey],
    ][]) {
      const onDemand = regionResources.settings.streams.capacityMode === 'on-demand';
      streams[streamKey] = new kinesis.Stream(this, `Stream-${streamKey}`, {
        streamName: physicalName(spec.suffix),
        ...(onDemand
          ? { streamMode: kinesis.StreamMode.ON_DEMAND }
          : { streamMode: kinesis.StreamMode.PROVISIONED, shardCount: spec.shardCount }),
        retentionPeriod: Duration.hours(spec.retentionHours),
        encryption: kinesis.StreamEncryption.KMS,
        encryptionKey: key,
        removalPolicy: RemovalPolicy.RETAIN,
      });
    }
    this.streams = streams;

    const buckets = {} as Record<BucketKey, s3.Bucket>;
    for (const bucketKey of Object.keys(regionResources.buckets) as BucketKey[]) {
      // Name left to CloudFormation (bucket names are global); functions get it from their env.
      buckets[bucketKey] = new s3.Bucket(this, `Bucket-${bucketKey}`, {
        encryption: s3.BucketEncryption.KMS,
        encryptionKey: key,
        bucketKeyEnabled: true,
        enforceSSL: true,
        blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
        objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
        versioned: true,
        removalPolicy: RemovalPolicy.RETAIN,
      });
    }
    this.buckets = buckets;

    const prefix = parameterPrefix(this.region);
    for (const [paramKey, spec] of Object.entries(regionResources.parameters)) {
      new ssm.StringParameter(this, `Parameter-${paramKey}`, {
        parameterName: `${prefix}${spec.path}`,
        stringValue: spec.initial(this.region),
        description: spec.purpose,
      });
    }

    const functions = {} as Record<FunctionKey, PacelineFunction>;
    for (const [fnKey, spec] of Object.entries(regionResources.functions) as [
      FunctionKey,
      (typeof regionResources.functions)[FunctionKey],
    ][]) {
      const fn = new PacelineFunction(this, `Function-${fnKey}`, {
        spec,
        entry: `${projectRoot}/${spec.entry}`,
        projectRoot,
        environment: functionEnvironment(spec, {
          region: this.region,
          tableName: (k) => tables[k].tableName,
          streamName: (k) => streams[k].streamName,
          bucketName: (k) => buckets[k].bucketName,
          redis: {
            nodes: cache.endpoint,
            mode: 'cluster',
            tls: true,
            iam: { userId: cacheIdentity.userId, cacheName: cacheIdentity.replicationGroupId },
          },
        }),
        vpc: network.vpc,
        securityGroup: network.functionSecurityGroup,
        key,
        alarmTopic,
        ...('source' in spec && spec.source ? { stream: streams[spec.source.stream] } : {}),
      });
      // Least privilege: exactly the access the description declares.
      for (const [tableKey, access] of Object.entries(spec.tables) as [TableKey, TableAccess][]) {
        grantTable(fn.function, tables[tableKey], regionResources.tables[tableKey], access, key);
      }
      for (const streamKey of spec.writesStreams as readonly StreamKey[])
        streams[streamKey].grantWrite(fn.function);
      // Least privilege: object actions only under the function's own prefix (`<name>/…`, the
      // keys it writes), and the key only for what encryption/decryption of those objects needs.
      const used = (spec as FunctionSpec).buckets ?? {};
      for (const [bucketKey, access] of Object.entries(used) as [BucketKey, string][]) {
        const bucket = buckets[bucketKey];
        const actions = [
          ...(access === 'read' ? [] : ['s3:PutObject']),
          ...(access === 'write' ? [] : ['s3:GetObject']),
        ];
        fn.function.addToRolePolicy(
          new iam.PolicyStatement({ actions, resources: [bucket.arnForObjects(`${spec.name}/*`)] }),
        );
        key.grant(fn.function, ...(access === 'read' ? [] : ['kms:GenerateDataKey']), 'kms:Decrypt');
        acknowledgeObjectPrefix(this, bucket, spec.name);
      }
      // IAM authentication to the cache (SigV4 tokens signed with the function's role).
      if (spec.usesRedis)
        cache.grantConnect(fn.function, spec.readsParameters ? peerRegions.map((r) => r.region) : []);
      if (spec.readsParameters) {
        // Exactly the region's described parameters (no prefix wildcard), and each peer region's
        // publisher switch (a pacer publishes into every cache whose switch names its region).
        fn.function.addToRolePolicy(
          new iam.PolicyStatement({
            actions: ['ssm:GetParameter', 'ssm:GetParameters'],
            resources: [
              ...Object.values(regionResources.parameters).map((p) =>
                this.formatArn({
                  service: 'ssm',
                  resource: 'parameter',
                  resourceName: `${prefix.slice(1)}${p.path}`,
                }),
              ),
              ...peerRegions.map((peer) =>
                this.formatArn({
                  service: 'ssm',
                  region: peer.region,
                  resource: 'parameter',
                  resourceName: `${parameterPrefix(peer.region).slice(1)}${regionResources.parameters.publisherRegion.path}`,
                }),
              ),
            ],
          }),
        );
        // Peer caches are discovered, not hard-coded: DescribeReplicationGroups on the
        // same-named group of this and every peer region.
        fn.function.addToRolePolicy(
          new iam.PolicyStatement({
            actions: ['elasticache:DescribeReplicationGroups'],
            resources: [deployed.region, ...peerRegions.map((r) => r.region)].map((region) =>
              this.formatArn({
                service: 'elasticache',
                region,
                resource: 'replicationgroup',
                resourceName: cacheIdentity.replicationGroupId,
                arnFormat: ArnFormat.COLON_RESOURCE_NAME,
              }),
            ),
          }),
        );
      }
      functions[fnKey] = fn;
    }
    this.functions = functions;
    this.pacerAlarms = new PacerAlarms(this, 'PacerAlarms', {
      specs: pacerAlarmSpecs(regionResources.settings.pacer, regionResources.functions.pacer.name),
      alarmTopic,
    });
    this.adServerAccess = new PacelineAdServerAccess(this, 'AdServerAccess', {
      streams: Object.values(streams),
      budgetsTable: tables.budgets,
      ledgerTable: tables.spendLedger,
      key,
      cacheConnectArns: cache.connectArns(),
      cacheSecurityGroup: cache.securityGroup,
      cachePort: cache.port,
      managedPolicyName: `paceline-ad-server-${this.region}`,
    });
    this.dashboard = new RegionDashboard(this, 'Dashboard', {
      dashboardName: `paceline-${this.region}`,
      pacerService: regionResources.functions.pacer.name,
      shards: regionResources.settings.pacer.shards,
      streamFunctions: (Object.keys(functions) as FunctionKey[]).flatMap((k) => {
        const queue = functions[k].onFailureQueue;
        if (!queue) return [];
        return [
          {
            name: regionResources.functions[k].name,
            iteratorAge: functions[k].function.metric('IteratorAge', {
              statistic: 'Maximum',
              period: Duration.minutes(1),
            }),
            onFailureDepth: queue.metricApproximateNumberOfMessagesVisible({ period: Duration.minutes(1) }),
          },
        ];
      }),
    });
    acknowledgeFindings(this);
  }

  /**
   * A global table owned by this (the primary) region: a TableV2 with one replica per peer
   * region, each replica encrypted with its region's Paceline key (by alias), PITR everywhere.
   */
  private globalTable(
    tableKey: TableKey,
    spec: TableSpec,
    key: kms.IKey,
    peers: readonly DeployedRegion[],
  ): dynamodb.TableV2 {
    return new dynamodb.TableV2(this, `Table-${tableKey}`, {
      tableName: physicalName(spec.suffix),
      partitionKey: { name: spec.partitionKey.name, type: attributeType[spec.partitionKey.type] },
      sortKey: { name: spec.sortKey.name, type: attributeType[spec.sortKey.type] },
      billing: dynamodb.Billing.onDemand(),
      encryption: dynamodb.TableEncryptionV2.customerManagedKey(
        key,
        Object.fromEntries(
          peers.map((p) => [
            p.region,
            this.formatArn({
              service: 'kms',
              region: p.region,
              resource: 'alias',
              resourceName: regionalKeyAliasName,
            }),
          ]),
        ),
      ),
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      deletionProtection: true,
      removalPolicy: RemovalPolicy.RETAIN,
      replicas: peers.map((p) => ({ region: p.region })),
      ...(spec.ttlAttribute ? { timeToLiveAttribute: spec.ttlAttribute } : {}),
      globalSecondaryIndexes: (spec.indexes ?? []).map(indexProps),
    });
  }
}

/** A described index as CDK index props (the same for Table and TableV2). */
function indexProps(
  index: IndexSpec,
): dynamodb.GlobalSecondaryIndexProps & dynamodb.GlobalSecondaryIndexPropsV2 {
  return {
    indexName: index.name,
    partitionKey: { name: index.partitionKey.name, type: attributeType[index.partitionKey.type] },
    ...(index.sortKey
      ? { sortKey: { name: index.sortKey.name, type: attributeType[index.sortKey.type] } }
      : {}),
    projectionType:
      index.projection === 'ALL' ? dynamodb.ProjectionType.ALL : dynamodb.ProjectionType.KEYS_ONLY,
  };
}

/** DynamoDB actions per access level (no stream actions: no function reads a table stream). */
const tableActions = {
  read: [
    'dynamodb:BatchGetItem',
    'dynamodb:GetItem',
    'dynamodb:Query',
    'dynamodb:Scan',
    'dynamodb:ConditionCheckItem',
    'dynamodb:DescribeTable',
  ],
  write: [
    'dynamodb:BatchWriteItem',
    'dynamodb:PutItem',
    'dynamodb:UpdateItem',
    'dynamodb:DeleteItem',
    'dynamodb:DescribeTable',
  ],
} as const;

/**
 * Least-privilege table grant: the access level's actions on the table and on each of its
 * described indexes by name (CDK's own grants add `<table>/index/*`, a wildcard), plus the key
 * actions DynamoDB needs for a customer-managed key.
 */
function grantTable(
  grantee: iam.IGrantable,
  table: dynamodb.ITable,
  spec: TableSpec,
  access: TableAccess,
  key: kms.IKey,
): void {
  const reads = access !== 'write';
  const writes = access !== 'read';
  const actions = [...new Set([...(reads ? tableActions.read : []), ...(writes ? tableActions.write : [])])];
  const indexArns = reads ? (spec.indexes ?? []).map((i) => `${table.tableArn}/index/${i.name}`) : [];
  iam.Grant.addToPrincipal({ grantee, actions, resourceArns: [table.tableArn, ...indexArns] });
  key.grant(
    grantee,
    'kms:Decrypt',
    'kms:DescribeKey',
    ...(writes ? ['kms:Encrypt', 'kms:ReEncrypt*', 'kms:GenerateDataKey*'] : []),
  );
}

/** The interface endpoint service of each API peer pacers call (shared/region/deployment.ts). */
const peerEndpointService: Record<PeerEndpointService, ec2.InterfaceVpcEndpointAwsService> = {
  ssm: ec2.InterfaceVpcEndpointAwsService.SSM,
  elasticache: ec2.InterfaceVpcEndpointAwsService.ELASTICACHE,
};

/** Alias name of every region's Paceline key (`alias/paceline`): replica keys are named by it. */
const regionalKeyAliasName = 'paceline';
