import { App } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { type AdServerFleetStack, buildFleetExample } from '../../cdk/examples/ad-server-fleet.js';
import type { RegionalStack } from '../../cdk/regional-stack.js';
import { adServerServices, ENDPOINT_SERVICE_NAME, GATEWAY_SERVICES } from '../../shared/region/access.js';
import { clientEnvironment } from '../../shared/region/resources.js';
import { tempDir } from '../support/tmp.js';
import { cdkJson } from './support.js';

let fleet: AdServerFleetStack;
let paceline: RegionalStack;
let t: Template;
beforeAll(() => {
  const app = new App({
    context: { ...cdkJson.context, 'aws:cdk:bundling-stacks': [] },
    outdir: tempDir('paceline-fleet-'),
  });
  ({ fleet, paceline } = buildFleetExample(app));
  // cdk-nag and the Control Tower guard rules check the example too.
  app.synth();
  t = Template.fromStack(fleet);
});

describe('example: an ad-server fleet in its own VPC', () => {
  it("peers its VPC with Paceline's and routes both ways: the fleet's subnets to Paceline, Paceline's to the fleet", () => {
    const peering = Object.values(t.findResources('AWS::EC2::VPCPeeringConnection'));
    expect(peering).toHaveLength(1);
    expect(peering[0]?.Properties.PeerRegion).toBeUndefined(); // same region
    const routes = Object.values(t.findResources('AWS::EC2::Route')).map((r) => r.Properties);
    const toFleet = routes.filter((r) => r.DestinationCidrBlock === '10.30.0.0/16');
    const toPaceline = routes.filter((r) => r.DestinationCidrBlock !== '10.30.0.0/16');
    // Three isolated subnets on each side.
    expect(toFleet).toHaveLength(3);
    expect(toPaceline).toHaveLength(3);
    expect(JSON.stringify(toPaceline[0]?.DestinationCidrBlock)).toContain('ImportValue');
  });

  it("admits the fleet's CIDR to the cache port", () => {
    t.hasResourceProperties('AWS::EC2::SecurityGroupIngress', {
      IpProtocol: 'tcp',
      FromPort: paceline.cache.port,
      ToPort: paceline.cache.port,
      CidrIp: '10.30.0.0/16',
    });
  });

  it('reaches every AWS API the client calls through its own VPC endpoints (derived from the description)', () => {
    const services = adServerServices(paceline.description);
    expect(services).toEqual(['dynamodb', 'kinesis', 'ssm']);
    const endpoints = Object.values(t.findResources('AWS::EC2::VPCEndpoint')).map((r) => ({
      type: r.Properties.VpcEndpointType ?? 'Gateway',
      service: [...JSON.stringify(fleet.resolve(r.Properties.ServiceName)).matchAll(/\.([a-z0-9-]+)"/g)].at(
        -1,
      )?.[1],
    }));
    expect(endpoints.filter((e) => e.type === 'Gateway').map((e) => e.service)).toEqual(
      services.filter((s) => GATEWAY_SERVICES.includes(s)).map((s) => ENDPOINT_SERVICE_NAME[s]),
    );
    expect(
      endpoints
        .filter((e) => e.type === 'Interface')
        .map((e) => e.service)
        .sort(),
    ).toEqual(
      services
        .filter((s) => !GATEWAY_SERVICES.includes(s))
        .map((s) => ENDPOINT_SERVICE_NAME[s])
        .sort(),
    );
  });

  it("runs as a role holding Paceline's ad-server policy, and outputs the client's environment", () => {
    t.hasResourceProperties('AWS::IAM::Role', {
      ManagedPolicyArns: Match.arrayWith([Match.objectLike({ 'Fn::ImportValue': Match.anyValue() })]),
    });
    const expected = Object.keys(
      clientEnvironment(paceline.description, {
        region: paceline.region,
        tableName: () => 't',
        streamName: () => 's',
        redis: { nodes: 'n', mode: 'cluster', tls: true, iam: { userId: 'u', cacheName: 'c' } },
      }),
    );
    expect(Object.keys(fleet.access.clientEnv).sort()).toEqual(expected.sort());
    const outputs = t.toJSON().Outputs as Record<string, { Value: unknown }>;
    for (const name of expected)
      expect(
        Object.keys(outputs).some((k) => k.includes(`ClientEnv${name.replace(/_/g, '')}`)),
        name,
      ).toBe(true);
    expect(fleet.access.clientEnv.REDIS_MODE).toBe('cluster');
    expect(fleet.access.clientEnv.REDIS_TLS).toBe('true');
    expect(fleet.access.clientEnv.REDIS_IAM_USER).toBe('paceline-app');
    // The default stage's fleet reads the shard count from SSM (its policy allows exactly that).
    expect(fleet.access.clientEnv.PACER_SHARDS).toBeUndefined();
  });
});
