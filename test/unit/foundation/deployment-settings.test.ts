import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { deploymentSettings, InvalidDeploymentSettingsError } from '../../../shared/region/deployment.js';

const cdkJson = JSON.parse(readFileSync(new URL('../../../cdk.json', import.meta.url), 'utf8')) as {
  context: Record<string, unknown>;
};
const lookup = (ctx: Record<string, unknown>) => (key: string) => ctx[key];
const base = cdkJson.context;

function errorOf(ctx: Record<string, unknown>): InvalidDeploymentSettingsError {
  try {
    deploymentSettings(lookup(ctx));
  } catch (error) {
    if (error instanceof InvalidDeploymentSettingsError) return error;
    throw error;
  }
  throw new Error('expected an InvalidDeploymentSettingsError');
}

describe('deployment settings (cdk.json context)', () => {
  it('reads the committed cdk.json: two regions, the primary, and settings feeding each description', () => {
    const d = deploymentSettings(lookup(base));
    expect(d.account).toBe('123456789012');
    expect(d.primaryRegion).toBe('us-east-1');
    expect(d.regions.map((r) => r.region)).toEqual(['us-east-1', 'us-west-2']);
    const [east] = d.regions;
    expect(east?.description.settings.pacer.shards).toBe(24);
    expect(east?.description.settings.cache).toEqual({
      nodeType: 'cache.r7g.large',
      shards: 3,
      replicasPerShard: 1,
    });
    expect(east?.description.settings.streams.capacityMode).toBe('provisioned');
    expect(east?.description.functions.pacer.schedule.instances).toHaveLength(72);
    expect(east?.network).toEqual({ cidr: '10.20.0.0/16', peering: {}, endpoints: {} });
  });

  it('applies defaults, then the region, then the -c shorthands', () => {
    const d = deploymentSettings(
      lookup({
        ...base,
        'paceline:regions': {
          'us-east-1': { network: { cidr: '10.20.0.0/16' }, cache: { nodeType: 'cache.r7g.xlarge' } },
          'us-west-2': {
            network: { cidr: '10.21.0.0/16' },
            streams: { capacityMode: 'on-demand' },
            pacer: { shards: 8 },
          },
        },
        'paceline:pacerInstancesPerShard': '2',
      }),
    );
    const [east, west] = d.regions;
    expect(east?.description.settings.cache.nodeType).toBe('cache.r7g.xlarge');
    expect(west?.description.settings.cache.nodeType).toBe('cache.r7g.large');
    expect(west?.description.settings.streams.capacityMode).toBe('on-demand');
    expect(west?.description.settings.pacer).toMatchObject({ shards: 8, instancesPerShard: 2 });
    expect(west?.description.functions.pacer.schedule.instances).toHaveLength(16);
    expect(east?.description.settings.pacer).toMatchObject({ shards: 24, instancesPerShard: 2 });
  });

  it('reads the stage, alarm subscriptions, stream sizes and pacer deployment settings', () => {
    const d = deploymentSettings(
      lookup({
        ...base,
        'paceline:stage': 'staging',
        'paceline:alarms': {
          subscriptions: [
            { kind: 'email', endpoint: 'ops@example.com' },
            { kind: 'sms', endpoint: '+14155550100' },
            { kind: 'https', endpoint: 'https://hooks.example.com/paceline' },
            { kind: 'sqs', endpoint: 'arn:aws:sqs:us-east-1:123456789012:alarms' },
            { kind: 'lambda', endpoint: 'arn:aws:lambda:us-west-2:123456789012:function:page' },
          ],
        },
        'paceline:defaults': {
          pacer: {
            memoryMb: 2048,
            reservedConcurrency: 200,
            auction: 'first-price',
            audienceTimeZone: 'America/Chicago',
          },
          streams: { actions: { shards: 8, parallelizationFactor: 4 } },
        },
      }),
    );
    expect(d.stage).toBe('staging');
    expect(d.alarmSubscriptions.map((s) => s.kind)).toEqual(['email', 'sms', 'https', 'sqs', 'lambda']);
    const east = d.regions[0]?.description;
    expect(east?.names.base).toBe('staging-paceline');
    expect(east?.streams.actions.shardCount).toBe(8);
    expect(east?.streams.spend.shardCount).toBe(2);
    expect(east?.functions.ingestActions.source.parallelizationFactor).toBe(4);
    expect(east?.functions.trackSpend.source.parallelizationFactor).toBe(1);
    expect(east?.functions.pacer).toMatchObject({ memoryMb: 2048, reservedConcurrency: 200 });
    expect(east?.functions.pacer.settings.PACER_AUCTION).toBe('first-price');
    expect(east?.functions.pacer.settings.PACER_AUDIENCE_TIME_ZONE).toBe('America/Chicago');
    // Without them: the default names, no subscription, the described sizes.
    const plain = deploymentSettings(lookup(base));
    expect(plain.stage).toBeUndefined();
    expect(plain.alarmSubscriptions).toEqual([]);
    expect(plain.regions[0]?.description.names.base).toBe('paceline');
    expect(plain.regions[0]?.description.functions.pacer).not.toHaveProperty('reservedConcurrency');
    expect(plain.regions[0]?.description.functions.pacer.settings.PACER_AUCTION).toBe('second-price');
  });

  it('accepts a plain list of regions for a single region', () => {
    const d = deploymentSettings(
      lookup({ 'paceline:account': '123456789012', 'paceline:regions': ['eu-west-1'] }),
    );
    expect(d.regions[0]?.network.cidr).toBe('10.20.0.0/16');
  });

  it.each([
    [{ 'paceline:account': '12345' }, 'paceline:account'],
    [{ 'paceline:regions': 'us-east-1' }, 'paceline:regions'],
    [
      { 'paceline:regions': { 'us-east-1': { network: { cidr: '10.20.0.0/16' } }, 'mars-1': {} } },
      'paceline:regions.mars-1',
    ],
    [{ 'paceline:primaryRegion': 'eu-west-1' }, 'paceline:primaryRegion'],
    [{ 'paceline:defaults': { cache: { shards: 'three' } } }, 'paceline:defaults.cache.shards'],
    // A value out of range is named where it was given: the defaults, the region, a -c shorthand.
    [{ 'paceline:defaults': { cache: { nodeType: 'r7g' } } }, 'paceline:defaults.cache.nodeType'],
    [{ 'paceline:defaults': { pacer: { shards: 0 } } }, 'paceline:defaults.pacer.shards'],
    [{ 'paceline:defaults': { pacer: { tickMs: 7000 } } }, 'paceline:defaults.pacer.tickMs'],
    [
      { 'paceline:regions': { 'us-east-1': { network: { cidr: '10.20.0.0/16' }, pacer: { shards: 300 } } } },
      'paceline:regions.us-east-1.pacer.shards',
    ],
    [{ 'paceline:pacerShards': '0' }, 'paceline:pacerShards'],
    [{ 'paceline:pacerShards': '100000' }, 'paceline:pacerShards'],
    [{ 'paceline:defaults': { pacer: { memoryMb: 64 } } }, 'paceline:defaults.pacer.memoryMb'],
    [{ 'paceline:defaults': { pacer: { auction: 'dutch' } } }, 'paceline:defaults.pacer.auction'],
    [{ 'paceline:defaults': { pacer: { auction: 2 } } }, 'paceline:defaults.pacer.auction'],
    [
      { 'paceline:defaults': { pacer: { audienceTimeZone: 'Mars/Olympus' } } },
      'paceline:defaults.pacer.audienceTimeZone',
    ],
    [{ 'paceline:defaults': { pacer: { audienceTimeZone: 5 } } }, 'paceline:defaults.pacer.audienceTimeZone'],
    [
      { 'paceline:defaults': { pacer: { reservedConcurrency: 71 } } },
      'paceline:defaults.pacer.reservedConcurrency',
    ],
    [
      { 'paceline:defaults': { streams: { actions: { shards: 0 } } } },
      'paceline:defaults.streams.actions.shards',
    ],
    [
      { 'paceline:defaults': { streams: { spend: { shards: 100000 } } } },
      'paceline:defaults.streams.spend.shards',
    ],
    [
      { 'paceline:defaults': { streams: { spend: { parallelizationFactor: 11 } } } },
      'paceline:defaults.streams.spend.parallelizationFactor',
    ],
    [{ 'paceline:defaults': { streams: { clicks: { shards: 1 } } } }, 'paceline:defaults.streams.clicks'],
    [{ 'paceline:stage': 'my stage' }, 'paceline:stage'],
    [{ 'paceline:stage': 'Staging' }, 'paceline:stage'],
    [{ 'paceline:stage': 'a-very-long-stage' }, 'paceline:stage'],
    [{ 'paceline:stage': 'my-paceline' }, 'paceline:stage'],
    [{ 'paceline:stage': 'awsome' }, 'paceline:stage'],
    [
      { 'paceline:alarms': { subscriptions: [{ kind: 'pager', endpoint: 'x' }] } },
      'paceline:alarms.subscriptions[0].kind',
    ],
    [
      { 'paceline:alarms': { subscriptions: [{ kind: 'sms', endpoint: '555-0100' }] } },
      'paceline:alarms.subscriptions[0].endpoint',
    ],
    [
      { 'paceline:alarms': { subscriptions: [{ kind: 'https', endpoint: 'http://example.com' }] } },
      'paceline:alarms.subscriptions[0].endpoint',
    ],
    [{ 'paceline:alarms': { subscriptions: 'ops@example.com' } }, 'paceline:alarms.subscriptions'],
    [
      { 'paceline:defaults': { streams: { capacityMode: 'ON_DEMAND' } } },
      'paceline:defaults.streams.capacityMode',
    ],
    [{ 'paceline:defaults': { cahce: {} } }, 'paceline:defaults.cahce'],
    [{ 'paceline:pacerShards': '2.5' }, 'paceline:pacerShards'],
    [
      { 'paceline:regions': { 'us-east-1': { network: { cidr: '10.20.0.0/16' } }, 'us-west-2': {} } },
      'paceline:regions.us-west-2.network',
    ],
    [
      {
        'paceline:regions': {
          'us-east-1': { network: { cidr: '10.20.0.0/16' } },
          'us-west-2': { network: { cidr: '10.20.128.0/17' } },
        },
      },
      'paceline:regions.us-west-2.network.cidr',
    ],
    [
      { 'paceline:regions': { 'us-east-1': { network: { cidr: '10.20.0.1/16' } } } },
      'paceline:regions.us-east-1.network.cidr',
    ],
    [
      {
        'paceline:regions': {
          'us-east-1': {
            network: { cidr: '10.20.0.0/16', peering: { 'eu-west-1': 'pcx-0123456789abcdef0' } },
          },
        },
      },
      'paceline:regions.us-east-1.network.peering.eu-west-1',
    ],
    [
      { 'paceline:regions': { 'us-east-1': { network: { cidr: '10.20.0.0/16', vpcId: 'vpc-1' } } } },
      'paceline:regions.us-east-1.network.vpcId',
    ],
  ])('rejects %j naming the key %s', (override, key) => {
    const error = errorOf({ ...base, ...override });
    expect(error.key).toBe(key);
    expect(error.message.startsWith(`cdk.json context ${key}`)).toBe(true);
    expect(error.message).not.toContain('\n');
  });
});

describe("network.endpoints (a region's interface endpoints, for the peers' private DNS)", () => {
  const ssm = {
    dnsName: 'vpce-0123456789abcdef0-ab12cd34.ssm.us-west-2.vpce.amazonaws.com',
    hostedZoneId: 'Z1YSA3EXCYUU9Z',
  };
  const elasticache = {
    dnsName: 'vpce-0fedcba9876543210-zz99yy88.elasticache.us-west-2.vpce.amazonaws.com',
    hostedZoneId: 'Z1YSA3EXCYUU9Z',
  };
  const withWest = (endpoints: unknown) => ({
    ...base,
    'paceline:regions': {
      'us-east-1': { network: { cidr: '10.20.0.0/16' } },
      'us-west-2': { network: { cidr: '10.21.0.0/16', endpoints } },
    },
  });

  it('reads the endpoints of a region, each service on its own, as alias targets', () => {
    const d = deploymentSettings(lookup(withWest({ ssm, elasticache })));
    expect(d.regions[1]?.network.endpoints).toEqual({ ssm, elasticache });
    expect(d.regions[0]?.network.endpoints).toEqual({});
    expect(deploymentSettings(lookup(withWest({ ssm }))).regions[1]?.network.endpoints).toEqual({ ssm });
  });

  it.each([
    ['not an object', 'vpce-x', 'paceline:regions.us-west-2.network.endpoints'],
    ['an unknown service', { sqs: ssm }, 'paceline:regions.us-west-2.network.endpoints.sqs'],
    [
      'a service given as a string',
      { ssm: `${ssm.hostedZoneId}:${ssm.dnsName}` },
      'paceline:regions.us-west-2.network.endpoints.ssm',
    ],
    [
      'an unknown field',
      { ssm: { ...ssm, vpcEndpointId: 'vpce-1' } },
      'paceline:regions.us-west-2.network.endpoints.ssm.vpcEndpointId',
    ],
    [
      'no dnsName',
      { ssm: { hostedZoneId: ssm.hostedZoneId } },
      'paceline:regions.us-west-2.network.endpoints.ssm.dnsName',
    ],
    [
      "another service's endpoint",
      { ssm: elasticache },
      'paceline:regions.us-west-2.network.endpoints.ssm.dnsName',
    ],
    [
      "another region's endpoint",
      { ssm: { ...ssm, dnsName: ssm.dnsName.replace('us-west-2', 'us-east-1') } },
      'paceline:regions.us-west-2.network.endpoints.ssm.dnsName',
    ],
    [
      'a zonal DNS name',
      { ssm: { ...ssm, dnsName: ssm.dnsName.replace('-ab12cd34.', '-ab12cd34-us-west-2a.') } },
      'paceline:regions.us-west-2.network.endpoints.ssm.dnsName',
    ],
    [
      'the service default name',
      { ssm: { ...ssm, dnsName: 'ssm.us-west-2.amazonaws.com' } },
      'paceline:regions.us-west-2.network.endpoints.ssm.dnsName',
    ],
    [
      'a bad hosted zone id',
      { elasticache: { ...elasticache, hostedZoneId: 'z1ysa3' } },
      'paceline:regions.us-west-2.network.endpoints.elasticache.hostedZoneId',
    ],
  ])('rejects %s, naming the key and where the value comes from', (_what, endpoints, key) => {
    const error = errorOf(withWest(endpoints));
    expect(error.key).toBe(key);
    expect(error.message.startsWith(`cdk.json context ${key}`)).toBe(true);
    // What to do: where the value comes from (SSM, after the first deploy), or what is allowed.
    expect(error.message).toMatch(
      key.endsWith('.sqs') || key.endsWith('.vpcEndpointId')
        ? /\(allowed: (ssm, elasticache|dnsName, hostedZoneId)\)/
        : /SSM \/paceline\/us-west-2\/network\/endpoints\/(ssm|elasticache)?/,
    );
    expect(error.message).not.toContain('\n');
  });
});

describe('deployment settings from -c (strings)', () => {
  it('parses JSON objects given on the command line, and names the key of bad JSON', () => {
    const d = deploymentSettings(lookup({ ...base, 'paceline:defaults': '{"cache":{"shards":6}}' }));
    expect(d.regions[0]?.description.settings.cache.shards).toBe(6);
    expect(errorOf({ ...base, 'paceline:defaults': '{cache:' }).key).toBe('paceline:defaults');
  });
});
