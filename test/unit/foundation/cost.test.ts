import { describe, expect, it } from 'vitest';
import { defaultTraffic, regionCost, unitPrices } from '../../../cdk/cost.js';
import { regionDescription } from '../../../shared/region/resources.js';

const line = (c: ReturnType<typeof regionCost>, prefix: string) => {
  const l = c.lines.find((x) => x.item.startsWith(prefix));
  if (!l) throw new Error(`no line ${prefix}`);
  return l.monthlyUsd;
};

describe('cost on paper', () => {
  it('derives the always-on pacer from the description: instances × memory × a minute and a tick per minute', () => {
    const d = regionDescription({ pacer: { shards: 24, instancesPerShard: 3 } });
    const c = regionCost('us-east-1', d, 2);
    const instances = 24 * 3;
    const gbS =
      instances * (d.functions.pacer.memoryMb / 1024) * (60 + d.settings.pacer.tickMs / 1000) * 730 * 60;
    const expected = gbS * unitPrices.lambdaGbSecondArm + instances * 730 * 60 * unitPrices.lambdaRequest;
    expect(line(c, 'Lambda: pacer')).toBeCloseTo(expected, 0);
    const big = regionCost(
      'us-east-1',
      regionDescription({ pacer: { shards: 240, instancesPerShard: 3 } }),
      2,
    );
    expect(line(big, 'Lambda: pacer') / line(c, 'Lambda: pacer')).toBeCloseTo(10, 3);
  });

  it('counts the cache nodes of the layout and replication only with other regions', () => {
    const d = regionDescription({ cache: { shards: 2, replicasPerShard: 2 } });
    const one = regionCost('us-east-1', d, 1);
    expect(line(one, 'ElastiCache')).toBeCloseTo(
      6 * (unitPrices.cacheNodeHour['cache.r7g.large'] as number) * 730,
      1,
    );
    const two = regionCost('us-east-1', d, 2);
    expect(line(two, 'DynamoDB')).toBeGreaterThan(line(one, 'DynamoDB'));
    expect(one.totalUsd).toBeCloseTo(
      one.lines.reduce((s, l) => s + l.monthlyUsd, 0),
      1,
    );
  });

  it('scales the stream functions with the traffic assumption', () => {
    const d = regionDescription();
    const base = regionCost('us-east-1', d, 2);
    const double = regionCost('us-east-1', d, 2, {
      ...defaultTraffic,
      actionsPerSec: defaultTraffic.actionsPerSec * 2,
      noticesPerSec: defaultTraffic.noticesPerSec * 2,
    });
    expect(line(double, 'Lambda: ingest') / line(base, 'Lambda: ingest')).toBeCloseTo(2, 1);
  });

  it('refuses a node type it has no price for, naming it', () => {
    const d = regionDescription({ cache: { nodeType: 'cache.m7g.large' } });
    expect(() => regionCost('us-east-1', d, 1)).toThrow(/cache\.m7g\.large/);
  });
});
