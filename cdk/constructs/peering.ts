import * as ec2 from 'aws-cdk-lib/aws-ec2';
import { Construct } from 'constructs';

/** One peer region, as far as this region knows it. */
export interface PeerRegion {
  readonly region: string;
  readonly cidr: string;
  /**
   * This region requests the peering (it comes first in `paceline:regions`) and knows the peer's
   * VPC id: the connection is created here. @default not requested here
   */
  readonly requestToVpcId?: string;
  /** The peering connection already exists (requested by the peer): route through it. @default none */
  readonly connectionId?: string;
}

/** Props of {@link RegionPeering}. */
export interface RegionPeeringProps {
  readonly vpc: ec2.IVpc;
  readonly peers: readonly PeerRegion[];
}

/**
 * The network path between regional VPCs (a peer region's pacer publishes into this region's
 * cache after a failover): a VPC peering connection per pair of regions, requested by the
 * earlier region of the pair, and a route to the peer's CIDR in every isolated subnet. The cache
 * security group admits the peer CIDRs (cdk/constructs/cache.ts). Same account: CloudFormation
 * accepts the peering itself. Ids are never looked up (offline synth): the peer VPC id and the
 * connection id come from `cdk.json` after the first deploy (docs/operations.md).
 */
export class RegionPeering extends Construct {
  /** Peering connections requested by this region, by peer region. */
  readonly connections: Record<string, ec2.CfnVPCPeeringConnection> = {};

  constructor(scope: Construct, id: string, props: RegionPeeringProps) {
    super(scope, id);
    const subnets = props.vpc.selectSubnets({ subnetType: ec2.SubnetType.PRIVATE_ISOLATED }).subnets;
    for (const peer of props.peers) {
      let connectionId = peer.connectionId;
      if (peer.requestToVpcId) {
        const connection = new ec2.CfnVPCPeeringConnection(this, `To-${peer.region}`, {
          vpcId: props.vpc.vpcId,
          peerVpcId: peer.requestToVpcId,
          peerRegion: peer.region,
        });
        this.connections[peer.region] = connection;
        connectionId = connection.ref;
      }
      if (!connectionId) continue;
      subnets.forEach((subnet, i) => {
        new ec2.CfnRoute(this, `Route-${peer.region}-${i}`, {
          routeTableId: subnet.routeTable.routeTableId,
          destinationCidrBlock: peer.cidr,
          vpcPeeringConnectionId: connectionId,
        });
      });
    }
  }
}
