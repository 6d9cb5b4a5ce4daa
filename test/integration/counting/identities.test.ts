/**
 * Identities end to end on redis-server, standalone and a 3-node cluster (docs/counting.md,
 * "Identities"): an event counts for every identity it carries, a cap counts on its key, a
 * household shared by two users is one count, v1 events and v2 events share a log, the
 * no-identity policies, and bad input (an unknown key, an event with 100 identities) refused in
 * one line with nothing counted.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeRecord } from '../../../shared/counting/event-decode.js';
import {
  type ActionEvent,
  encodeActionEvent,
  InvalidActionFieldError,
} from '../../../shared/counting/event-encode.js';
import { type IdentityKind, identityKind, identityTag } from '../../../shared/counting/identities.js';
import { ingestRecords } from '../../../shared/counting/ingest.js';
import { userCapLogKey } from '../../../shared/counting/keys.js';
import { type CapCandidate, InvalidCountQueryError } from '../../../shared/counting/query.js';
import { ActionStore } from '../../../shared/counting/store.js';
import { DAY_MS, HOUR_MS, ManualClock, MINUTE_MS } from '../../../shared/time/clock.js';
import { type RedisUnderTest, startRedisWithClient } from '../../support/redis.js';

const NOW = Date.UTC(2026, 10, 28, 12);
const entities = { ad: 11, adGroup: 7, campaign: 3, advertiser: 1 };
let insertion = 0;

function event(at: number, ids: Partial<ActionEvent>, action: 'impression' | 'click' = 'impression'): Buffer {
  const insertionId = Buffer.alloc(16);
  insertionId.writeUInt32BE(++insertion, 12);
  insertionId[0] = 7;
  return encodeActionEvent({ timestamp: NOW + at, insertionId, action, ...entities, ...ids });
}

const candidate = (caps: CapCandidate['caps'], extra: Partial<CapCandidate> = {}): CapCandidate => ({
  id: 'c',
  entities,
  caps,
  ...extra,
});

describe.each(['standalone', 'cluster'] as const)('identities on %s redis-server', (mode) => {
  let redis: RedisUnderTest;
  let store: ActionStore;
  const clock = new ManualClock(NOW);
  let base = 5000;
  /** Fresh ids per test (the server is shared by the tests of a mode). */
  const ids = () => {
    base += 10;
    return {
      user: String(base),
      user2: String(base + 1),
      device: String(base + 2),
      household: String(base + 3),
    };
  };

  beforeAll(async () => {
    redis = await startRedisWithClient(mode);
    store = new ActionStore({ redis: redis.client, clock });
  });
  afterAll(async () => {
    await redis?.stop();
  });

  it('an event counts for every identity it carries; a household shared by two users is one count', async () => {
    const id = ids();
    const result = await ingestRecords(store, [
      event(-HOUR_MS, { userId: id.user, deviceId: id.device, householdId: id.household }),
      event(-MINUTE_MS, { userId: id.user2, householdId: id.household }),
    ]);
    // Three arrivals for the first event, two for the second.
    expect(result.added).toBe(5);
    const caps = (key: string) => [{ level: 'campaign', windowMs: DAY_MS, max: 2, key }];
    const check = (key: string, identities: Record<string, string>) =>
      store.checkFrequencyCaps({ identities, candidates: [candidate(caps(key))] });
    const household = await check('household', { household: id.household });
    expect(household.rejected[0]?.strictest).toMatchObject({ count: 2, remaining: 0, key: 'household' });
    const user = await check('user', { user: id.user, household: id.household });
    expect(user.allowed[0]?.strictest?.count).toBe(1);
    const device = await check('device', { device: id.device });
    expect(device.allowed[0]?.strictest).toMatchObject({ count: 1, key: 'device' });
    // The second user's own count: one.
    expect(
      (await store.checkFrequencyCaps({ userId: id.user2, candidates: [candidate(caps('user'))] })).allowed,
    ).toHaveLength(1);
  });

  it('a household-only event (no user id) counts for the household; redelivery counts nothing again', async () => {
    const id = ids();
    const record = event(-MINUTE_MS, { householdId: id.household });
    expect(decodeRecord(record).keys).toEqual([`h${id.household}`]);
    expect((await ingestRecords(store, [record])).added).toBe(1);
    expect((await ingestRecords(store, [record, record])).added).toBe(0);
    const r = await store.checkFrequencyCaps({
      identities: { household: id.household },
      candidates: [candidate([{ level: 'ad', windowMs: HOUR_MS, max: 1, key: 'household' }])],
    });
    expect(r.rejected[0]?.strictest?.count).toBe(1);
  });

  it('v1 events (user only, the old bytes) and v2 events share the user log; old readers see v1 unchanged', async () => {
    const id = ids();
    const v1 = event(-2 * HOUR_MS, { userId: id.user });
    expect(v1[0]).toBe(1);
    expect(v1.length).toBe(67);
    const v2 = event(-HOUR_MS, { userId: id.user, householdId: id.household });
    expect(v2[0]).toBe(2);
    await ingestRecords(store, [v1, v2]);
    const r = await store.checkFrequencyCaps({
      userId: id.user,
      candidates: [candidate([{ level: 'campaign', windowMs: DAY_MS, max: 5 }])],
    });
    expect(r.allowed[0]?.strictest?.count).toBe(2);
    expect((await store.eventLog(id.user)).length).toBe(59 + 75);
  });

  it('recency, lifetime and household caps in one request: each counted on its own identity', async () => {
    const id = ids();
    await ingestRecords(store, [
      event(-20 * MINUTE_MS, { userId: id.user, householdId: id.household }),
      event(-5 * DAY_MS, { userId: id.user2, householdId: id.household }),
      event(-2 * DAY_MS, { userId: id.user }),
    ]);
    const r = await store.checkFrequencyCaps({
      identities: { user: id.user, household: id.household },
      candidates: [
        candidate(
          [
            { level: 'campaign', recencyMs: 30 * MINUTE_MS },
            { level: 'campaign', lifetime: true, max: 10 },
            { level: 'advertiser', windowMs: 7 * DAY_MS, max: 2, key: 'household' },
          ],
          { flightStartMs: NOW - 10 * DAY_MS },
        ),
      ],
    });
    const v = r.rejected[0];
    expect(v?.hits.map((h) => [h.cap.level, h.count, h.key])).toEqual([
      ['campaign', 1, undefined],
      ['advertiser', 2, 'household'],
    ]);
    // Strictest: both have remaining 0; the household cap's 7 days is the longer window.
    expect(v?.strictest).toMatchObject({ count: 2, key: 'household' });
  });

  it('an identity whose read fails fails its own check only: checks beside it and after it are exact', async () => {
    const id = ids();
    const broken = ids().household;
    await ingestRecords(store, [
      event(-20 * MINUTE_MS, { userId: id.user, householdId: id.household }),
      event(-2 * DAY_MS, { userId: id.user2, householdId: id.household }),
      event(-3 * DAY_MS, { userId: id.user, householdId: broken }),
    ]);
    // A household key of the wrong type: its GET is answered with an error, after the user's
    // reply of the same check has been counted.
    const household = identityKind('household') as IdentityKind;
    await redis.client.hset(userCapLogKey(identityTag(household, broken)), 'x', '1');
    const caps: CapCandidate['caps'] = [
      { level: 'campaign', windowMs: DAY_MS, max: 1 },
      { level: 'advertiser', windowMs: 7 * DAY_MS, max: 2, key: 'household' },
      { level: 'campaign', recencyMs: HOUR_MS },
    ];
    const check = (householdId: string) =>
      store.checkFrequencyCaps({
        identities: { user: id.user, household: householdId },
        candidates: [candidate(caps), candidate(caps.slice(0, 2), { id: 'd' })],
      });
    const expected = await check(id.household);
    expect(expected.rejected.map((v) => v.hits.map((h) => [h.cap.level, h.count, h.key ?? 'user']))).toEqual([
      [
        ['campaign', 1, 'user'],
        ['advertiser', 2, 'household'],
        ['campaign', 1, 'user'],
      ],
      [
        ['campaign', 1, 'user'],
        ['advertiser', 2, 'household'],
      ],
    ]);
    const [before, failed, after] = await Promise.allSettled([
      check(id.household),
      check(broken),
      check(id.household),
    ]);
    expect(failed.status).toBe('rejected');
    expect(String((failed as PromiseRejectedResult).reason)).toMatch(/WRONGTYPE/);
    expect(before).toEqual({ status: 'fulfilled', value: expected });
    expect(after).toEqual({ status: 'fulfilled', value: expected });
    expect(await check(id.household)).toEqual(expected);
  });

  it('no identity: refuse hits the cap, uncapped skips it, coarser counts on the household; each reported', async () => {
    const id = ids();
    await ingestRecords(store, [event(-MINUTE_MS, { userId: id.user, householdId: id.household })]);
    const caps = [{ level: 'ad', windowMs: HOUR_MS, max: 1 }];
    const before = { ...store.noIdentityCounts };
    const refuse = await store.checkFrequencyCaps({ identities: {}, candidates: [candidate(caps)] });
    expect(refuse.rejected[0]?.hits[0]).toMatchObject({ count: 0, remaining: 0, missingIdentity: true });
    expect(refuse.noIdentity).toEqual({ policy: 'refuse', refused: 1, uncapped: 0, coarser: 0 });
    const uncapped = await store.checkFrequencyCaps({
      identities: { household: id.household },
      candidates: [candidate(caps)],
      noIdentity: 'uncapped',
    });
    expect(uncapped.allowed[0]).toEqual({ id: 'c', allowed: true, hits: [] });
    expect(uncapped.noIdentity).toMatchObject({ uncapped: 1 });
    const coarser = await store.checkFrequencyCaps({
      identities: { household: id.household },
      candidates: [candidate(caps)],
      noIdentity: 'coarser',
    });
    expect(coarser.rejected[0]?.strictest).toMatchObject({ count: 1, key: 'household' });
    expect(coarser.noIdentity).toMatchObject({ coarser: 1 });
    // Coarser without a household id: refused.
    const none = await store.checkFrequencyCaps({ candidates: [candidate(caps)], noIdentity: 'coarser' });
    expect(none.noIdentity).toMatchObject({ refused: 1 });
    expect(store.noIdentityCounts).toEqual({
      refused: before.refused + 2,
      uncapped: before.uncapped + 1,
      coarser: before.coarser + 1,
    });
  });

  it('a stream session: no creative twice and at most 2 ads of one advertiser per session', async () => {
    const id = ids();
    const session = String(Number(id.user) * 7);
    // One pod earlier in the session: ad 11 of advertiser 1, then another ad of advertiser 1.
    await ingestRecords(store, [
      event(-20 * MINUTE_MS, { userId: id.user, householdId: id.household, sessionId: session }),
      encodeActionEvent({
        timestamp: NOW - 19 * MINUTE_MS,
        insertionId: Buffer.alloc(16, 9),
        action: 'impression',
        ...entities,
        ad: 12,
        sessionId: session,
      }),
    ]);
    const sessionCaps = [
      { level: 'ad', windowMs: 6 * HOUR_MS, max: 1, key: 'session' },
      { level: 'advertiser', windowMs: 6 * HOUR_MS, max: 2, key: 'session' },
    ];
    const r = await store.checkFrequencyCaps({
      identities: { user: id.user, session },
      candidates: [
        { id: 'same-ad', entities, caps: sessionCaps },
        { id: 'other-ad', entities: { ...entities, ad: 13 }, caps: sessionCaps },
        { id: 'other-advertiser', entities: { ...entities, ad: 14, advertiser: 2 }, caps: sessionCaps },
      ],
    });
    expect(r.allowed.map((v) => v.id)).toEqual(['other-advertiser']);
    expect(r.rejected.map((v) => [v.id, v.hits.map((h) => `${h.cap.level}:${h.count}:${h.key}`)])).toEqual([
      ['same-ad', ['ad:1:session', 'advertiser:2:session']],
      ['other-ad', ['advertiser:2:session']],
    ]);
    // Another session of the same user starts clean.
    const fresh = await store.checkFrequencyCaps({
      identities: { user: id.user, session: `${session}1` },
      candidates: [{ id: 'same-ad', entities, caps: sessionCaps }],
    });
    expect(fresh.allowed).toHaveLength(1);
  });

  it('bad input is refused in one line and counts nothing', async () => {
    const id = ids();
    const cookie = store.checkFrequencyCaps({
      userId: id.user,
      candidates: [candidate([{ level: 'ad', windowMs: HOUR_MS, max: 1, key: 'cookie' }])],
    });
    await expect(cookie).rejects.toThrow(InvalidCountQueryError);
    await expect(cookie).rejects.toThrow(
      /^candidate c cap 0: key "cookie" is not an identity kind: give user, device, household, session \(default user\)\.$/,
    );
    const hundred = Array.from({ length: 100 }, (_, i) => ({ kind: 'household', id: i + 1 }));
    const send = () => event(0, { userId: id.user, identities: hundred });
    expect(send).toThrow(InvalidActionFieldError);
    expect(send).toThrow(
      /^Action event field "identities" lists 100 identities: an event carries at most one id per kind \(user, device, household, session\), 4 in all — send the ones its caps count on\.$/,
    );
    expect(() => event(0, { userId: id.user, identities: [{ kind: 'cookie', id: 1 }] })).toThrow(
      /field "identities" has kind "cookie": known kinds are user, device, household, session\./,
    );
    expect(() =>
      event(0, { userId: id.user, householdId: 5, identities: [{ kind: 'household', id: 6 }] }),
    ).toThrow(/gives the household twice \(5 and 6\)/);
    expect(() => event(0, {})).toThrow(/at least one identity \(user, device, household, session\)/);
    await expect(
      store.checkFrequencyCaps({ identities: { cookie: '1' }, candidates: [candidate([])] }),
    ).rejects.toThrow(/"cookie" is not an identity kind/);
    await expect(
      store.checkFrequencyCaps({
        identities: { household: 'abc' },
        candidates: [candidate([{ level: 'ad', windowMs: 1, max: 1, key: 'household' }])],
      }),
    ).rejects.toThrow(/household id "abc" is not an id events carry/);
    // A bad cap beside a household cap is named as the caller wrote it (candidate id, cap index).
    const besideHouseholdCap = (other: CapCandidate) =>
      store.checkFrequencyCaps({
        identities: { user: id.user, household: id.household },
        candidates: [candidate([{ level: 'ad', windowMs: HOUR_MS, max: 1, key: 'household' }]), other],
      });
    await expect(
      besideHouseholdCap({
        id: 'second',
        entities,
        caps: [
          { level: 'ad', windowMs: HOUR_MS, max: 1, key: 'household' },
          { level: 'campaign', recencyMs: 0 },
        ],
      }),
    ).rejects.toThrow(
      /^candidate second cap 1 \{"level":"campaign","recencyMs":0\}: recencyMs must be a positive integer/,
    );
    await expect(
      store.checkFrequencyCaps({
        identities: { user: id.user, household: id.household },
        candidates: [
          candidate(
            [
              { level: 'ad', windowMs: HOUR_MS, max: 1, key: 'household' },
              { level: 'campaign', lifetime: true, max: 3 },
            ],
            {
              flightStartMs: NOW - 40 * DAY_MS,
            },
          ),
        ],
      }),
    ).rejects.toThrow(/^candidate c cap 1 .*the flight started at .* before the store's retention horizon/);
    // A malformed block beside a household cap: named as written too.
    await expect(
      besideHouseholdCap({
        id: 'blocked',
        entities,
        caps: [{ level: 'placement', block: true } as unknown as CapCandidate['caps'][number]],
      }),
    ).rejects.toThrow(/^candidate blocked cap 0: unknown dimension "placement"/);
    // Nothing reached Redis for this user.
    expect((await store.eventLog(id.user)).length).toBe(0);
  });
});
