/**
 * Example: an ad-server fleet in its own VPC, next to a Paceline region (same account and
 * region), reaching the cache over VPC peering and Kinesis, DynamoDB and SSM through its own VPC
 * endpoints, with Paceline's ad-server policy on its role and the client's environment as stack
 * outputs (cdk/constructs/ad-server-fleet.ts; docs/operations.md, "Ad-server fleet network").
 *
 *   npx cdk synth --app 'npx tsx cdk/examples/ad-server-fleet.ts' Paceline-us-east-1-AdServerFleet
 *
 * The fleet's compute (ECS, EC2, EKS) is yours: run it in `fleetSubnets` as `fleetRole` with the
 * `ClientEnv*` outputs in its environment. test/synth/ad-server-fleet.test.ts synthesizes it.
 */
import { App, RemovalPolicy, Stack, type StackProps } from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as kms from 'aws-cdk-lib/aws-kms';
import * as logs from 'aws-cdk-lib/aws-logs';
import type { Construct } from 'constructs';
import { buildApp } from '../app.js';
import { AdServerFleetAccess } from '../constructs/ad-server-fleet.js';
import { acknowledgeNag } from '../nag.js';
import type { RegionalStack } from '../regional-stack.js';

/** Props of {@link AdServerFleetStack}. */
export interface AdServerFleetStackProps extends StackProps {
  /** The Paceline region's stack. */
  readonly paceline: RegionalStack;
  /** The fleet VPC's CIDR (disjoint from every Paceline VPC). @default '10.30.0.0/16' */
  readonly cidr?: string;
}

/** The fleet's VPC (private subnets only), its role, and its access to Paceline. */
export class AdServerFleetStack extends Stack {
  readonly vpc: ec2.Vpc;
  readonly role: iam.Role;
  readonly access: AdServerFleetAccess;

  constructor(scope: Construct, id: string, props: AdServerFleetStackProps) {
    super(scope, id, props);
    const cidr = props.cidr ?? '10.30.0.0/16';
    this.vpc = new ec2.Vpc(this, 'Vpc', {
      ipAddresses: ec2.IpAddresses.cidr(cidr),
      maxAzs: 3,
      natGateways: 0,
      subnetConfiguration: [
        { name: 'ad-servers', subnetType: ec2.SubnetType.PRIVATE_ISOLATED, cidrMask: 20 },
      ],
    });
    const flowLogs = new logs.LogGroup(this, 'FlowLogs', {
      retention: logs.RetentionDays.ONE_YEAR,
      encryptionKey: props.paceline.key as kms.IKey,
      removalPolicy: RemovalPolicy.RETAIN,
    });
    this.vpc.addFlowLog('FlowLog', { destination: ec2.FlowLogDestination.toCloudWatchLogs(flowLogs) });
    this.role = new iam.Role(this, 'AdServerRole', {
      assumedBy: new iam.ServicePrincipal('ecs-tasks.amazonaws.com'),
      description: 'The ad servers: Paceline access only (the example adds nothing else)',
    });
    this.access = new AdServerFleetAccess(this, 'Paceline', {
      paceline: props.paceline,
      fleetVpc: this.vpc,
      fleetCidr: cidr,
      fleetSubnets: { subnetType: ec2.SubnetType.PRIVATE_ISOLATED },
      fleetRole: this.role,
    });
    for (const child of this.vpc.node.findAll())
      if (child instanceof ec2.SecurityGroup && child.node.path.includes('/Paceline-'))
        acknowledgeNag(
          child,
          'AwsSolutions-EC23',
          "A Paceline VPC endpoint's group in the fleet's VPC: CDK admits 443 from the VPC's CIDR (an intrinsic the rule cannot evaluate); the VPC has no internet path.",
        );
  }
}

/** The Paceline app with the fleet example beside the primary region's stack. */
export function buildFleetExample(app = new App()): {
  app: App;
  fleet: AdServerFleetStack;
  paceline: RegionalStack;
} {
  const { stacks } = buildApp(app);
  const paceline = stacks[0] as RegionalStack;
  const fleet = new AdServerFleetStack(app, `${paceline.stackName}-AdServerFleet`, {
    env: { account: paceline.account, region: paceline.region },
    paceline,
  });
  return { app, fleet, paceline };
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop() ?? '')) {
  // buildApp registers cdk-nag and the Control Tower guard rules: they check the fleet too.
  buildFleetExample().app.synth();
}
