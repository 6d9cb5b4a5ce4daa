import { CfnOutput, Stack } from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import type * as iam from 'aws-cdk-lib/aws-iam';
import { Construct } from 'constructs';
import { adServerServices, ENDPOINT_SERVICE_NAME, GATEWAY_SERVICES } from '../../shared/region/access.js';
import { clientEnvironment } from '../../shared/region/resources.js';
import type { RegionalStack } from '../regional-stack.js';

/** Props of {@link AdServerFleetAccess}. */
export interface AdServerFleetAccessProps {
  /** The Paceline region the fleet uses (same account and region as the fleet). */
  readonly paceline: RegionalStack;
  /** The fleet's own VPC. */
  readonly fleetVpc: ec2.IVpc;
  /** Its IPv4 CIDR, disjoint from Paceline's (routes and the cache rule are by CIDR). */
  readonly fleetCidr: string;
  /** The subnets the ad servers run in: they get the routes to Paceline's VPC. */
  readonly fleetSubnets: ec2.SubnetSelection;
  /** The role the ad servers run as: it gets Paceline's ad-server managed policy. */
  readonly fleetRole: iam.IRole;
  /**
   * VPC endpoints in the fleet's VPC for the AWS APIs the client calls (DynamoDB gateway,
   * Kinesis and SSM interface endpoints). Off when the fleet reaches AWS otherwise (a NAT).
   * @default true
   */
  readonly endpoints?: boolean;
}

/**
 * An ad-server fleet in its own VPC, connected to a Paceline region:
 *
 * - **the cache over VPC peering**: ElastiCache in cluster mode answers with every node's own
 *   address (CLUSTER SLOTS, MOVED redirections), so the fleet must reach each node directly —
 *   peering routes the whole Paceline VPC; PrivateLink (one NLB address per endpoint) would not
 *   (docs/operations.md, "Ad-server fleet network"). The peering is requested from the fleet's
 *   VPC (same account and region: CloudFormation accepts it), routes go both ways, and the cache's
 *   security group admits the fleet's CIDR on the cache port;
 * - **AWS APIs through the fleet's own endpoints**: what the client calls (derived from the
 *   region description, shared/region/access.ts `adServerServices`): DynamoDB through a gateway
 *   endpoint, Kinesis and SSM through interface endpoints with private DNS;
 * - **permissions**: Paceline's ad-server managed policy on the fleet's role;
 * - **the client's environment** (`configFromEnv` of `paceline/client`), as stack outputs
 *   `ClientEnv<VARIABLE>` and {@link AdServerFleetAccess.clientEnv}.
 */
export class AdServerFleetAccess extends Construct {
  readonly peering: ec2.CfnVPCPeeringConnection;
  /** The ad servers' environment (tokens resolved at deploy). */
  readonly clientEnv: Readonly<Record<string, string>>;

  constructor(scope: Construct, id: string, props: AdServerFleetAccessProps) {
    super(scope, id);
    const { paceline } = props;
    const d = paceline.description;
    const pacelineVpc = paceline.network.vpc;
    this.peering = new ec2.CfnVPCPeeringConnection(this, 'Peering', {
      vpcId: props.fleetVpc.vpcId,
      peerVpcId: pacelineVpc.vpcId,
    });
    props.fleetVpc.selectSubnets(props.fleetSubnets).subnets.forEach((subnet, i) => {
      new ec2.CfnRoute(this, `ToPaceline${i}`, {
        routeTableId: subnet.routeTable.routeTableId,
        destinationCidrBlock: pacelineVpc.vpcCidrBlock,
        vpcPeeringConnectionId: this.peering.ref,
      });
    });
    pacelineVpc
      .selectSubnets({ subnetType: ec2.SubnetType.PRIVATE_ISOLATED })
      .subnets.forEach((subnet, i) => {
        new ec2.CfnRoute(this, `ToFleet${i}`, {
          routeTableId: subnet.routeTable.routeTableId,
          destinationCidrBlock: props.fleetCidr,
          vpcPeeringConnectionId: this.peering.ref,
        });
      });
    new ec2.CfnSecurityGroupIngress(this, 'CacheIngress', {
      groupId: paceline.cache.securityGroup.securityGroupId,
      ipProtocol: 'tcp',
      fromPort: paceline.cache.port,
      toPort: paceline.cache.port,
      cidrIp: props.fleetCidr,
      description: 'Paceline ad-server fleet over the VPC peering',
    });
    if (props.endpoints ?? true) {
      for (const service of adServerServices(d)) {
        if (GATEWAY_SERVICES.includes(service)) {
          const gateway =
            service === 's3'
              ? ec2.GatewayVpcEndpointAwsService.S3
              : ec2.GatewayVpcEndpointAwsService.DYNAMODB;
          props.fleetVpc.addGatewayEndpoint(`Paceline-${service}`, {
            service: gateway,
            subnets: [props.fleetSubnets],
          });
        } else {
          props.fleetVpc.addInterfaceEndpoint(`Paceline-${service}`, {
            service: new ec2.InterfaceVpcEndpointAwsService(ENDPOINT_SERVICE_NAME[service]),
            privateDnsEnabled: true,
            subnets: props.fleetSubnets,
          });
        }
      }
    }
    props.fleetRole.addManagedPolicy(paceline.adServerAccess.policy);
    this.clientEnv = clientEnvironment(d, {
      region: Stack.of(paceline).region,
      tableName: (k) => paceline.tables[k].tableName,
      streamName: (k) => paceline.streams[k].streamName,
      redis: {
        nodes: paceline.cache.endpoint,
        mode: 'cluster',
        tls: true,
        iam: { userId: d.cache.userId, cacheName: d.cache.replicationGroupId },
      },
      // The client library reads the shard count under the default names' parameters: a stage's
      // fleet gets it in its environment instead.
      ...(d.names.stage === undefined ? {} : { pacerShards: d.settings.pacer.shards }),
      deploymentRegions: paceline.deploymentRegions,
    });
    for (const [name, value] of Object.entries(this.clientEnv))
      new CfnOutput(this, `ClientEnv${name.replace(/_/g, '')}`, {
        value,
        description: `${name} for the ad servers (paceline/client configFromEnv)`,
      });
  }
}
