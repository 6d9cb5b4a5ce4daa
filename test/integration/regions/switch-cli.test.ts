/**
 * `paceline failover` / `failback` against two local regions whose pacers run (every shard, one
 * instance per region, ticked in the background on a manual clock): exit codes, `--json` shapes,
 * idempotence, `--wait` confirming from A's cache that every shard was claimed at the new
 * generation (by B's pacer, then by A's again), and the documented failures.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../../cli/paceline.js';
import type { PacingController } from '../../../shared/pacing/controller/api.js';
import { createLinearController } from '../../../shared/pacing/controller/linear.js';
import { readAuditLog } from '../../../shared/pacing/publisher.js';
import type { RedisClient } from '../../../shared/redis/connect.js';
import { ManualClock } from '../../../shared/time/clock.js';
import {
  REGION_A,
  REGION_B,
  type RegionalInstance,
  regionalInstance,
  startTwoRegions,
  type TwoRegions,
} from './support.js';

const TICK = 10_000;
const SHARDS = 4;
const clock = new ManualClock(Date.UTC(2026, 10, 21, 16, 0, 0));
const controller = createLinearController() as PacingController<unknown, unknown>;
let two: TwoRegions;
let instances: RegionalInstance[];
let running = true;
let ticking: Promise<void>;

beforeAll(async () => {
  two = await startTwoRegions(clock, 500);
  instances = [];
  for (const region of [REGION_A, REGION_B]) {
    for (let shard = 0; shard < SHARDS; shard++) {
      instances.push(regionalInstance({ two, region, shard, instance: 0, clock, controller, tickMs: TICK }));
    }
  }
  // The pacers tick in the background (a simulated tick every 150 ms of real time).
  ticking = (async () => {
    while (running) {
      const tick = Math.floor(clock.now() / TICK);
      await Promise.all(instances.map((x) => x.tick(tick)));
      await two.link.deliverDue();
      clock.advance(TICK);
      await new Promise((r) => setTimeout(r, 150));
    }
  })();
}, 60_000);

afterAll(async () => {
  running = false;
  await ticking;
  for (const x of instances ?? []) x.close();
  await two?.stop();
});

async function cli(argv: string[], env: Record<string, string | undefined>) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(argv, {
    out: (l) => out.push(l),
    err: (l) => err.push(l),
    env,
    now: () => Date.now(),
  });
  return { code, out, err };
}

const envA = () => (two.regions[REGION_A] as NonNullable<(typeof two.regions)[string]>).clientEnv;

describe('paceline failover / failback', () => {
  it('fails A over to B, confirms from A’s cache, is idempotent, and fails back', async () => {
    const over = await cli(
      ['failover', '--region', REGION_A, '--to', REGION_B, '--json', '--wait', '30'],
      envA(),
    );
    expect(over.code, over.err.join('\n')).toBe(0);
    expect(over.err[0]).toMatch(/^Target: local us-east-1/);
    expect(over.out).toHaveLength(1);
    const r = JSON.parse(over.out[0] as string);
    expect(r).toEqual({
      region: REGION_A,
      publisherRegion: REGION_B,
      previous: REGION_A,
      generation: r.generation,
      changed: true,
      confirmedShards: SHARDS,
      shards: SHARDS,
    });
    expect(r.generation).toBeGreaterThan(1);
    // The claims at the new generation are B's pacer's.
    const log = await readAuditLog(two.redis[REGION_A] as RedisClient, 0);
    const lastClaim = log.filter((e) => e.kind === 'claim' && e.accepted).at(-1);
    expect(lastClaim?.publisher.startsWith(`${REGION_B}/`)).toBe(true);

    const again = await cli(['failover', '--region', REGION_A, '--to', REGION_B, '--json'], envA());
    expect(again.code).toBe(0);
    expect(JSON.parse(again.out[0] as string)).toMatchObject({ changed: false, generation: r.generation });

    const back = await cli(['failback', '--region', REGION_A, '--wait', '30'], envA());
    expect(back.code, back.err.join('\n')).toBe(0);
    expect(back.out[0]).toMatch(/^Target: local us-east-1/);
    expect(back.out.slice(1).join('\n').split('\n')).toEqual([
      `${REGION_A}: publisher-region ${REGION_B} → ${REGION_A} (generation ${r.generation + 1})`,
      `${SHARDS}/${SHARDS} shards claimed at generation ≥ ${r.generation + 1}`,
    ]);
    const after = (await readAuditLog(two.redis[REGION_A] as RedisClient, 0))
      .filter((e) => e.kind === 'claim' && e.accepted)
      .at(-1);
    expect(after?.publisher.startsWith(`${REGION_A}/`)).toBe(true);
  }, 90_000);

  it('exits 2 on usage errors and without a target, 6 when SSM is unreachable, 4 when not confirmed in time', async () => {
    expect((await cli(['failover', '--region', REGION_A], envA())).code).toBe(2);
    expect((await cli(['failover', '--region', REGION_A, '--to', REGION_A], envA())).code).toBe(2);
    expect((await cli(['failover', '--region', 'not a region', '--to', REGION_B], envA())).code).toBe(2);
    expect((await cli(['failback', '--region', REGION_A, '--to', REGION_B], envA())).code).toBe(2);
    expect((await cli(['failback', '--region', REGION_A, '--wait', 'soon'], envA())).code).toBe(2);
    const none = await cli(['failback', '--region', REGION_A], {});
    expect(none.code).toBe(2);
    expect(none.err).toHaveLength(1);
    const down = await cli(['failback', '--region', REGION_A], {
      ...envA(),
      AWS_ENDPOINT_URL_SSM: 'http://127.0.0.1:9',
    });
    expect(down.code).toBe(6); // EXIT.unreachable
    expect(down.err.at(-1)).toMatch(/^paceline failback: could not reach a store: /);
    // A region whose pacers do not run (B's cache, no shard claims B's own switch anew): not confirmed.
    running = false;
    await ticking;
    const envB = (two.regions[REGION_B] as NonNullable<(typeof two.regions)[string]>).clientEnv;
    const unconfirmed = await cli(
      ['failover', '--region', REGION_B, '--to', REGION_A, '--json', '--wait', '0.5'],
      envB,
    );
    expect(unconfirmed.code).toBe(5); // EXIT.partial: written, not confirmed by every shard
    expect(JSON.parse(unconfirmed.out[0] as string)).toMatchObject({
      changed: true,
      confirmedShards: 0,
      shards: SHARDS,
    });
    const help = await cli(['failover', '--help'], {});
    expect(help.code).toBe(0);
    expect(help.out[0]).toMatch(/^usage: paceline failover --region A --to B/);
  }, 60_000);
});
