import { describe, expect, it } from 'vitest';
import {
  type AccessContext,
  adServerAccess,
  adServerServices,
  functionAccess,
  functionServices,
  regionEndpoints,
} from '../../../shared/region/access.js';
import { defaultNames, InvalidStageError, stageNames } from '../../../shared/region/names.js';
import {
  clientEnvironment,
  type FunctionKey,
  type FunctionSpec,
  regionDescription,
  regionResources,
} from '../../../shared/region/resources.js';
import { pacerScheduleLayout } from '../../../shared/region/schedule.js';

const context: AccessContext = {
  partition: 'aws',
  account: '123456789012',
  region: 'us-east-1',
  peerRegions: ['us-west-2'],
  bucketArn: (k) => `arn:aws:s3:::bucket-${k}`,
  keyArn: 'arn:aws:kms:us-east-1:123456789012:key/k',
};

describe('stage names', () => {
  it('keep the default names without a stage and put the stage in front of every name with one', () => {
    expect(defaultNames.resource('budgets')).toBe('paceline-budgets');
    expect(defaultNames.parameterPrefix('us-east-1')).toBe('/paceline/us-east-1/');
    expect(defaultNames.cacheReplicationGroupId).toBe('paceline');
    const qa = stageNames('qa');
    expect(qa.resource('budgets')).toBe('qa-paceline-budgets');
    expect(qa.parameterPrefix('us-east-1')).toBe('/qa-paceline/us-east-1/');
    expect(qa.keyAliasName).toBe('alias/qa-paceline');
    expect(qa.stackName('us-east-1')).toBe('Paceline-qa-us-east-1');
  });

  it("never give one stage's name to another: a stage named like a suffix does not collide", () => {
    // `spend` would give `paceline-spend-ledger` if the stage followed `paceline-`.
    const names = (n: ReturnType<typeof stageNames>) =>
      Object.values(regionResources.tables).map((t) => n.resource(t.suffix));
    const defaults = names(defaultNames);
    for (const stage of ['spend', 'budgets', 'region', 'leases-x'])
      expect(names(stageNames(stage)).filter((x) => defaults.includes(x))).toEqual([]);
    // The rule pattern of one stage matches no rule of another.
    const re = (p: string) => new RegExp(`^${p.replace(/[.]/g, '\\.').replace('*', '.*')}$`);
    expect(re(defaultNames.pacerRulePattern).test(stageNames('pacer').pacerRuleName(0, 0))).toBe(false);
    expect(re(stageNames('a').pacerRulePattern).test(stageNames('a-b').pacerRuleName(0, 0))).toBe(false);
    expect(re(defaultNames.pacerRulePattern).test(defaultNames.pacerRuleName(2, 60))).toBe(true);
  });

  it.each(['', 'Staging', 'my stage', '1st', 'a--b', 'b-', 'thirteen-char', 'old-paceline', 'aws1'])(
    'refuses %j',
    (stage) => {
      expect(() => stageNames(stage)).toThrow(InvalidStageError);
    },
  );
});

describe('access derived from the description', () => {
  it('grants each function its tables by access level, the key, its log group and the actions Lambda requires on *', () => {
    for (const fnKey of Object.keys(regionResources.functions) as FunctionKey[]) {
      const spec: FunctionSpec = regionResources.functions[fnKey];
      const access = functionAccess(regionResources, fnKey, context);
      const sids = access.map((s) => s.sid);
      expect(new Set(sids).size, fnKey).toBe(sids.length);
      expect(sids).toEqual(expect.arrayContaining(['Logs', 'VpcNetworkInterfaces', 'XRay']));
      for (const table of Object.keys(spec.tables))
        expect(sids, `${fnKey} ${table}`).toContain(`Table${table.charAt(0).toUpperCase()}${table.slice(1)}`);
      // `*` only where AWS offers no resource-level permission.
      for (const s of access.filter((x) => x.resources.includes('*')))
        expect(['VpcNetworkInterfaces', 'XRay']).toContain(s.sid);
      // No wildcard action anywhere.
      expect(access.flatMap((s) => s.actions).some((a) => a.includes('*'))).toBe(false);
      expect(access.find((s) => s.sid === 'Logs')?.resources).toEqual([
        `arn:aws:logs:us-east-1:123456789012:log-group:/aws/lambda/paceline-${spec.name}:*`,
      ]);
    }
  });

  it("gives the pacer its parameters (the overrides as one family), peers' switches, cache discovery and connect", () => {
    const access = functionAccess(regionResources, 'pacer', context);
    const of = (sid: string) => access.find((s) => s.sid === sid);
    expect(of('Parameters')?.resources).toEqual([
      'arn:aws:ssm:us-east-1:123456789012:parameter/paceline/us-east-1/pacer/shards',
      'arn:aws:ssm:us-east-1:123456789012:parameter/paceline/us-east-1/publisher-region',
      'arn:aws:ssm:us-east-1:123456789012:parameter/paceline/us-east-1/pacer/leader-override/*',
      'arn:aws:ssm:us-west-2:123456789012:parameter/paceline/us-west-2/publisher-region',
    ]);
    expect(of('DiscoverCaches')?.resources).toEqual([
      'arn:aws:elasticache:us-east-1:123456789012:replicationgroup:paceline',
      'arn:aws:elasticache:us-west-2:123456789012:replicationgroup:paceline',
    ]);
    expect(of('CacheConnect')?.resources).toHaveLength(4);
    // Stream functions connect to their own region's cache only.
    expect(
      functionAccess(regionResources, 'trackSpend', context).find((s) => s.sid === 'CacheConnect')?.resources,
    ).toHaveLength(2);
  });

  it('grants the ad-server client what the description says it does: no scan, no spend writes, the shard count', () => {
    const access = adServerAccess(regionResources, context);
    const actions = access.flatMap((s) => s.actions);
    expect(actions).toContain('ssm:GetParameter');
    expect(actions).not.toContain('dynamodb:Scan');
    expect(access.find((s) => s.sid === 'TableSpendLedger')?.actions).toEqual([
      'dynamodb:PutItem',
      'dynamodb:Query',
    ]);
    expect(JSON.stringify(access)).not.toContain('*');
  });

  it('derives the services called and the endpoints a VPC needs', () => {
    expect(functionServices(regionResources.functions.pacer)).toEqual([
      'dynamodb',
      'elasticache',
      'ssm',
      'xray',
    ]);
    expect(functionServices(regionResources.functions.ingestActions)).toEqual(['dynamodb', 's3', 'xray']);
    expect(regionEndpoints(regionResources)).toEqual({
      gateway: ['dynamodb', 's3'],
      interface: ['elasticache', 'ssm', 'xray'],
    });
    // A function that writes a stream would add Kinesis.
    const writer = { ...regionResources.functions.sweepSpend, writesStreams: ['spend'] } as FunctionSpec;
    expect(functionServices(writer)).toContain('kinesis');
    expect(adServerServices(regionResources)).toEqual(['dynamodb', 'kinesis', 'ssm']);
  });

  it("gives the client's environment from what it uses", () => {
    const env = clientEnvironment(regionResources, {
      region: 'us-east-1',
      tableName: (k) => `T-${k}`,
      streamName: (k) => `S-${k}`,
      redis: { nodes: 'h:6380', mode: 'cluster', tls: true, iam: { userId: 'u', cacheName: 'c' } },
    });
    expect(env).toEqual({
      AWS_REGION: 'us-east-1',
      BUDGETS_TABLE: 'T-budgets',
      SPEND_LEDGER_TABLE: 'T-spendLedger',
      ACTIONS_STREAM: 'S-actions',
      SPEND_STREAM: 'S-spend',
      REDIS_NODES: 'h:6380',
      REDIS_MODE: 'cluster',
      REDIS_TLS: 'true',
      REDIS_IAM_USER: 'u',
      REDIS_CACHE_NAME: 'c',
    });
    // Several regions: the client's guards lease within their allocation from the first instant.
    const several = clientEnvironment(regionResources, {
      region: 'us-west-2',
      tableName: (k) => `T-${k}`,
      streamName: (k) => `S-${k}`,
      redis: { nodes: 'h:6380', mode: 'cluster', tls: true },
      deploymentRegions: ['us-east-1', 'us-west-2'],
    });
    expect(several.PACELINE_REGIONS).toBe('us-east-1,us-west-2');
    const alone = clientEnvironment(regionResources, {
      region: 'us-west-2',
      tableName: (k) => `T-${k}`,
      streamName: (k) => `S-${k}`,
      redis: { nodes: 'h:6380', mode: 'cluster', tls: true },
      deploymentRegions: ['us-west-2'],
    });
    expect(alone.PACELINE_REGIONS).toBeUndefined();
  });
});

describe('pacer schedule layout', () => {
  it.each([
    [24, 3],
    [256, 3],
    [7, 9],
  ])(
    '%i shards × %i instances: every (shard, instance) once, ≤ 5 targets a rule, a shard’s instances in different rules',
    (shards, instancesPerShard) => {
      const d = regionDescription({ pacer: { shards, instancesPerShard } });
      const layout = pacerScheduleLayout(d.settings.pacer);
      const rules = layout.flatMap((s) => s.rules);
      const inputs = rules.flatMap((r) => r.targets.map((t) => JSON.stringify(t.input)));
      expect(inputs.sort()).toEqual(
        d.functions.pacer.schedule.instances.map((i) => JSON.stringify(i.input)).sort(),
      );
      expect(Math.max(...rules.map((r) => r.targets.length))).toBeLessThanOrEqual(5);
      for (const r of rules) expect(r.targets.every((t) => t.input.instance === r.instance)).toBe(true);
      expect(layout.every((s) => s.shards.length <= 64)).toBe(true);
    },
  );
});
