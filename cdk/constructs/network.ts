import { RemovalPolicy } from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import type * as kms from 'aws-cdk-lib/aws-kms';
import * as logs from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import { type AwsService, ENDPOINT_SERVICE_NAME } from '../../shared/region/access.js';
import { acknowledgeNag } from '../nag.js';

/** Props of {@link PrivateNetwork}. */
export interface PrivateNetworkProps {
  /** The VPC's CIDR (distinct per region: peered VPCs route by CIDR). @default '10.20.0.0/16' */
  readonly cidr?: string;
  /** Availability zones to span. @default 3 */
  readonly maxAzs?: number;
  /** Key that encrypts the flow-log group. */
  readonly key: kms.IKey;
  /** Name of the flow-log group. @default generated */
  readonly flowLogGroupName?: string;
  /** Retention of the flow logs. @default one year */
  readonly flowLogRetention?: logs.RetentionDays;
  /** Services reached through gateway endpoints (S3, DynamoDB: route-table entries, no charge). */
  readonly gatewayEndpoints: readonly AwsService[];
  /** Services reached through interface endpoints (shared/region/access.ts derives them). */
  readonly interfaceEndpoints: readonly AwsService[];
  /**
   * Peer regions' VPC CIDRs admitted on 443 to the interface endpoints of these services (by
   * the endpoint service's short name, e.g. `ssm`): peer pacers call this region's APIs through
   * them over the peering (cdk/constructs/peer-endpoint-dns.ts resolves the names there).
   * @default none (the endpoints admit this VPC only)
   */
  readonly endpointPeerCidrs?: Readonly<Record<string, readonly string[]>>;
}

/**
 * A VPC with isolated subnets only: no internet gateway, no NAT, so nothing in it has a public
 * endpoint. Functions reach AWS APIs through VPC endpoints — gateway endpoints for S3 and
 * DynamoDB, an interface endpoint (private DNS) for every other service they call; flow logs are
 * kept.
 */
export class PrivateNetwork extends Construct {
  /** The VPC. */
  readonly vpc: ec2.Vpc;
  /** Security group of the functions (clients of the cache). */
  readonly functionSecurityGroup: ec2.SecurityGroup;
  /** The interface endpoints, by the endpoint service's short name (`ssm`, `elasticache`, …). */
  readonly interfaceEndpoints: Readonly<Record<string, ec2.InterfaceVpcEndpoint>>;
  /** The gateway endpoints, by service. */
  readonly gatewayEndpoints: Readonly<Record<string, ec2.GatewayVpcEndpoint>>;

  constructor(scope: Construct, id: string, props: PrivateNetworkProps) {
    super(scope, id);
    this.vpc = new ec2.Vpc(this, 'Vpc', {
      ipAddresses: ec2.IpAddresses.cidr(props.cidr ?? '10.20.0.0/16'),
      maxAzs: props.maxAzs ?? 3,
      natGateways: 0,
      subnetConfiguration: [{ name: 'isolated', subnetType: ec2.SubnetType.PRIVATE_ISOLATED, cidrMask: 22 }],
    });
    const flowLogGroup = new logs.LogGroup(this, 'FlowLogs', {
      ...(props.flowLogGroupName ? { logGroupName: props.flowLogGroupName } : {}),
      retention: props.flowLogRetention ?? logs.RetentionDays.ONE_YEAR,
      encryptionKey: props.key,
      removalPolicy: RemovalPolicy.RETAIN,
    });
    this.vpc.addFlowLog('FlowLog', { destination: ec2.FlowLogDestination.toCloudWatchLogs(flowLogGroup) });
    const gateways: Record<string, ec2.GatewayVpcEndpoint> = {};
    for (const service of props.gatewayEndpoints) {
      const gateway = gatewayService[service];
      if (!gateway)
        throw new Error(`PrivateNetwork: ${service} has no gateway endpoint (only S3 and DynamoDB do).`);
      // Route-table entries in every (isolated) subnet: S3 (dead-letter payloads) and DynamoDB.
      gateways[service] = this.vpc.addGatewayEndpoint(service, { service: gateway });
    }
    this.gatewayEndpoints = gateways;
    this.functionSecurityGroup = new ec2.SecurityGroup(this, 'Functions', {
      vpc: this.vpc,
      description: 'Paceline functions (cache and VPC-endpoint clients)',
      allowAllOutbound: true,
    });
    const endpoints: Record<string, ec2.InterfaceVpcEndpoint> = {};
    for (const name of props.interfaceEndpoints) {
      const service = new ec2.InterfaceVpcEndpointAwsService(ENDPOINT_SERVICE_NAME[name]);
      // `open` (the default) admits this VPC's CIDR on 443; peers are added below, by CIDR.
      const endpoint = this.vpc.addInterfaceEndpoint(service.shortName, {
        service,
        privateDnsEnabled: true,
        subnets: { subnetType: ec2.SubnetType.PRIVATE_ISOLATED },
      });
      for (const sg of endpoint.connections.securityGroups)
        acknowledgeNag(
          sg,
          'AwsSolutions-EC23',
          `The ${service.shortName} interface endpoint's group: CDK admits 443 from this VPC's CIDR (an intrinsic the rule cannot evaluate) and, when published, the peer regions' CIDRs; the VPC has no internet path.`,
        );
      for (const cidr of props.endpointPeerCidrs?.[service.shortName] ?? [])
        endpoint.connections.allowFrom(
          ec2.Peer.ipv4(cidr),
          ec2.Port.tcp(443),
          `Peer region pacers (${cidr}) calling ${service.shortName} here over the peering`,
        );
      endpoints[service.shortName] = endpoint;
    }
    for (const shortName of Object.keys(props.endpointPeerCidrs ?? {}))
      if (!endpoints[shortName])
        throw new Error(
          `PrivateNetwork: endpointPeerCidrs names ${shortName}, which has no interface endpoint.`,
        );
    this.interfaceEndpoints = endpoints;
  }
}

/** The gateway endpoint of each service that has one. */
const gatewayService: Partial<Record<AwsService, ec2.GatewayVpcEndpointAwsService>> = {
  s3: ec2.GatewayVpcEndpointAwsService.S3,
  dynamodb: ec2.GatewayVpcEndpointAwsService.DYNAMODB,
};
