import { RemovalPolicy } from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import type * as kms from 'aws-cdk-lib/aws-kms';
import * as logs from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';

/** Props of {@link PrivateNetwork}. */
export interface PrivateNetworkProps {
  /** The VPC's CIDR (distinct per region: peered VPCs route by CIDR). @default '10.20.0.0/16' */
  readonly cidr?: string;
  /** Availability zones to span. @default 3 */
  readonly maxAzs?: number;
  /** Key that encrypts the flow-log group. */
  readonly key: kms.IKey;
  /** Interface endpoints the functions need (DynamoDB always gets a gateway endpoint). @default [SSM] */
  readonly interfaceEndpoints?: readonly ec2.InterfaceVpcEndpointAwsService[];
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
 * endpoint. Functions reach AWS APIs through VPC endpoints; flow logs are kept.
 */
export class PrivateNetwork extends Construct {
  /** The VPC. */
  readonly vpc: ec2.Vpc;
  /** Security group of the functions (clients of the cache). */
  readonly functionSecurityGroup: ec2.SecurityGroup;
  /** The interface endpoints, by the endpoint service's short name (`ssm`, `elasticache`, …). */
  readonly interfaceEndpoints: Readonly<Record<string, ec2.InterfaceVpcEndpoint>>;

  constructor(scope: Construct, id: string, props: PrivateNetworkProps) {
    super(scope, id);
    this.vpc = new ec2.Vpc(this, 'Vpc', {
      ipAddresses: ec2.IpAddresses.cidr(props.cidr ?? '10.20.0.0/16'),
      maxAzs: props.maxAzs ?? 3,
      natGateways: 0,
      subnetConfiguration: [{ name: 'isolated', subnetType: ec2.SubnetType.PRIVATE_ISOLATED, cidrMask: 22 }],
    });
    const flowLogGroup = new logs.LogGroup(this, 'FlowLogs', {
      retention: logs.RetentionDays.ONE_MONTH,
      encryptionKey: props.key,
      removalPolicy: RemovalPolicy.RETAIN,
    });
    this.vpc.addFlowLog('FlowLog', { destination: ec2.FlowLogDestination.toCloudWatchLogs(flowLogGroup) });
    this.vpc.addGatewayEndpoint('DynamoDb', { service: ec2.GatewayVpcEndpointAwsService.DYNAMODB });
    this.functionSecurityGroup = new ec2.SecurityGroup(this, 'Functions', {
      vpc: this.vpc,
      description: 'Paceline functions (cache and VPC-endpoint clients)',
      allowAllOutbound: true,
    });
    const endpoints: Record<string, ec2.InterfaceVpcEndpoint> = {};
    for (const service of props.interfaceEndpoints ?? [ec2.InterfaceVpcEndpointAwsService.SSM]) {
      // `open` (the default) admits this VPC's CIDR on 443; peers are added below, by CIDR.
      const endpoint = this.vpc.addInterfaceEndpoint(service.shortName, {
        service,
        privateDnsEnabled: true,
        subnets: { subnetType: ec2.SubnetType.PRIVATE_ISOLATED },
      });
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
