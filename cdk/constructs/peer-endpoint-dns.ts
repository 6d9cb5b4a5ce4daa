import type * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as route53 from 'aws-cdk-lib/aws-route53';
import { Construct } from 'constructs';
import type { EndpointAlias, PeerEndpointService } from '../../shared/region/deployment.js';

/** A peer region's interface endpoints this region resolves its APIs to. */
export interface PeerEndpoints {
  readonly region: string;
  /** By service: the peer endpoint's regional DNS name and alias hosted zone id (cdk.json). */
  readonly endpoints: Readonly<Partial<Record<PeerEndpointService, EndpointAlias>>>;
}

/** Props of {@link PeerEndpointDns}. */
export interface PeerEndpointDnsProps {
  /** This region's VPC: the zones are associated with it (and visible nowhere else). */
  readonly vpc: ec2.IVpc;
  readonly peers: readonly PeerEndpoints[];
}

/**
 * Private DNS for a peer region's AWS APIs inside this region's isolated VPC: for each peer
 * endpoint known (cdk.json, `network.endpoints` of the peer), a Route 53 private hosted zone
 * `<service>.<peer>.amazonaws.com` associated with this VPC, whose apex is an alias A record to
 * the peer's interface endpoint. The SDK's default endpoint for the peer region (e.g.
 * `ssm.us-west-2.amazonaws.com`) then resolves to the peer endpoint's private addresses, reached
 * over the VPC peering (cdk/constructs/peering.ts); the peer's endpoint admits this VPC's CIDR on
 * 443 (cdk/constructs/network.ts). No internet egress, no lookup at synth.
 *
 * Why not a cross-region interface endpoint: AWS PrivateLink's cross-region connectivity to AWS
 * services covers a fixed list of services (S3, IAM, ECR, KMS, ECS, Lambda, Firehose, Flink,
 * Route 53 at the time of writing), neither SSM nor ElastiCache (docs/operations.md).
 */
export class PeerEndpointDns extends Construct {
  /** The zones created, by `<service>.<peer region>.amazonaws.com`. */
  readonly zones: Record<string, route53.PrivateHostedZone> = {};

  constructor(scope: Construct, id: string, props: PeerEndpointDnsProps) {
    super(scope, id);
    for (const peer of props.peers) {
      for (const [service, alias] of Object.entries(peer.endpoints) as [
        PeerEndpointService,
        EndpointAlias,
      ][]) {
        // The commercial partition's suffix (cdk.json targets `aws` only): a literal, not the
        // AWS::URLSuffix token, because a zone name must be known at synth.
        const zoneName = `${service}.${peer.region}.amazonaws.com`;
        const zone = new route53.PrivateHostedZone(this, `${service}-${peer.region}`, {
          zoneName,
          vpc: props.vpc,
          comment: `Paceline: ${peer.region}'s ${service} API through its interface endpoint, over the peering`,
        });
        new route53.ARecord(this, `${service}-${peer.region}-Alias`, {
          zone,
          // Apex record: the SDK calls the zone name itself.
          target: route53.RecordTarget.fromAlias({
            bind: () => ({ dnsName: alias.dnsName, hostedZoneId: alias.hostedZoneId }),
          }),
          comment: `${peer.region} ${service} interface endpoint`,
        });
        this.zones[zoneName] = zone;
      }
    }
  }
}
