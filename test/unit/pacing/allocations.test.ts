/**
 * The allocation rule (shared/pacing/regions/allocations.ts), case by case: settings refused with
 * a clear message, floors, the home's first entry, grants that fit or are split by need, a budget
 * cut, reclaims only after ack + delay and only down to what the region provably spent, a report
 * older than the reclaim, a rehome's start from the latest authority, its settle time, and the
 * region side (floors and default lease before any entry, releases, a Redis that lost its fields,
 * a reclaim applied). The property test beside it checks Σ ≤ B under random lagged views.
 */
import { describe, expect, it } from 'vitest';
import {
  AllocationConfigError,
  allocationConfig,
  allocationSettingsFromEnv,
  floorOf,
  homeOf,
  keepOf,
  reclaimDelayMs,
  regionalRelease,
  regionalReleaseCap,
} from '../../../shared/pacing/regions/allocation-config.js';
import {
  type AuthorityEntry,
  type AuthorityInput,
  allocatedOf,
  authorityStep,
  type MailboxEntry,
  regionStep,
  syncAllocation,
} from '../../../shared/pacing/regions/allocations.js';
import { DEFAULT_RELEASE_CAP } from '../../../shared/spend/release.js';

const A = 'us-east-1';
const B2 = 'us-west-2';
const config = allocationConfig([A, B2]);
const BUDGET = 5_000_000;
const NOW = 1_800_000_000_000;

function mailbox(over: Partial<MailboxEntry> = {}): MailboxEntry {
  return { spent: 0, rel: 0, want: 0, seenG: 0, seenX: 0, ae: 0, home: A, fence: 0, atMs: NOW, ...over };
}

function input(over: Partial<AuthorityInput> = {}): AuthorityInput {
  return {
    nowMs: NOW,
    budgetMicros: BUDGET,
    home: A,
    fence: 0,
    settleUntilMs: 0,
    prior: [],
    mailboxes: new Map(),
    ...over,
  };
}

function entry(over: Partial<AuthorityEntry> = {}): AuthorityEntry {
  return {
    fence: 0,
    g: { [A]: 250_000, [B2]: 250_000 },
    x: {},
    rb: {},
    ack: { [A]: NOW + 60_000, [B2]: NOW + 60_000 },
    rs: {},
    ...over,
  };
}

describe('allocation settings', () => {
  it('defaults to strict with several regions, off with one, and refuses bad settings with the reason', () => {
    expect(allocationConfig([A, B2]).mode).toBe('strict');
    expect(allocationConfig([A]).mode).toBe('off');
    expect(() => allocationConfig([A, A])).toThrow(/repeat a region/);
    expect(() => allocationConfig([A, B2], { floorFraction: 0.2 })).toThrow(AllocationConfigError);
    expect(() => allocationConfig([A, B2], { floorFraction: 0.2 })).toThrow(
      /floorFraction=0.2 must be in \(0, 0.1\]/,
    );
    expect(() => allocationConfig([A, B2], { keepFraction: 0.5 })).toThrow(/keepFraction/);
    expect(() => allocationConfig([A, B2], { skewMarginMs: 60_000 })).toThrow(/twice skewMarginMs/);
    expect(() => allocationConfig([A, B2], { weights: { [A]: 1 } })).toThrow(/us-west-2 needs a weight/);
    expect(() => allocationConfig([], { mode: 'strict' })).toThrow(/list of regions/);
  });

  it('reads the regions and the mode from the environment', () => {
    expect(allocationSettingsFromEnv(A, { PACELINE_REGIONS: `${A},${B2}` })).toEqual({
      regions: [A, B2],
      mode: 'strict',
    });
    expect(allocationSettingsFromEnv(A, {})).toEqual({ regions: [A], mode: 'off' });
    expect(
      allocationSettingsFromEnv(A, { PACELINE_REGIONS: `${A},${B2}`, PACELINE_ALLOCATIONS: 'off' }).mode,
    ).toBe('off');
    expect(() => allocationSettingsFromEnv(A, { PACELINE_ALLOCATIONS: 'maybe' })).toThrow(
      /PACELINE_ALLOCATIONS="maybe" is invalid: expected strict or off/,
    );
    expect(() => allocationSettingsFromEnv(A, { PACELINE_REGIONS: B2 })).toThrow(/including us-east-1/);
  });

  it('homes, floors, keeps and the reclaim delay are deterministic', () => {
    expect(homeOf({}, config)).toBe(A);
    expect(homeOf({ allocHome: B2 }, config)).toBe(B2);
    expect(floorOf(BUDGET, A, config) + floorOf(BUDGET, B2, config)).toBe(500_000);
    expect(floorOf(BUDGET, 'eu-west-1', config)).toBe(0);
    const weighted = allocationConfig([A, B2], { weights: { [A]: 3, [B2]: 1 } });
    expect(floorOf(BUDGET, A, weighted)).toBe(375_000);
    expect(keepOf(BUDGET, B2, config)).toBe(12_500);
    // skew + lease-ahead (T by default) + T + replication margin
    expect(reclaimDelayMs(config)).toBe(5_000 + 600_000 + 600_000 + 5_000);
  });
});

describe('in-flight release across regions', () => {
  it('splits the release cap over the regions under strict allocations, so Σ stays within it', () => {
    for (const n of [1, 2, 3, 5]) {
      const each = regionalReleaseCap(0.0025, 'strict', n);
      expect(each * n).toBeCloseTo(0.0025, 12);
    }
    // One region, or allocations off: the guard's own cap.
    expect(regionalReleaseCap(0.0025, 'off', 3)).toBe(0.0025);
    expect(regionalReleaseCap(0.0025, 'strict', 0)).toBe(0.0025);
  });

  it('gives a region’s controller its part of the cap, and the headroom over E outside strict', () => {
    expect(regionalRelease('strict', 4)).toEqual({
      releaseCap: DEFAULT_RELEASE_CAP / 4,
      releaseHeadroom: false,
    });
    expect(regionalRelease('off', 1)).toEqual({ releaseCap: DEFAULT_RELEASE_CAP, releaseHeadroom: true });
  });
});

describe('authorityStep', () => {
  it('starts every region at its floor with a lease from now', () => {
    const d = authorityStep(input(), config);
    expect(d.created).toBe(true);
    expect(d.entry.g).toEqual({ [A]: 250_000, [B2]: 250_000 });
    expect(d.entry.ack[B2]).toBe(NOW + config.ackLeaseMs);
    expect(d.allocatedMicros).toBe(500_000);
  });

  it('grants what fits, splits by need when it does not, never above B', () => {
    const fits = authorityStep(
      input({
        current: entry(),
        mailboxes: new Map([
          [A, mailbox({ want: 1_000_000, seenG: 250_000 })],
          [B2, mailbox({ want: 2_000_000, seenG: 250_000 })],
        ]),
      }),
      config,
    );
    expect(fits.granted).toEqual({ [A]: 750_000, [B2]: 1_750_000 });
    const split = authorityStep(
      input({
        current: entry(),
        mailboxes: new Map([
          [A, mailbox({ want: 5_000_000 })],
          [B2, mailbox({ want: 5_000_000 })],
        ]),
      }),
      config,
    );
    expect(split.granted).toEqual({ [A]: 2_250_000, [B2]: 2_250_000 });
    expect(split.allocatedMicros).toBe(BUDGET);
  });

  it('grants nothing to a region following another home or fence, or whose lease expired', () => {
    const d = authorityStep(
      input({
        current: entry({ ack: { [A]: NOW + 60_000, [B2]: NOW - 1 } }),
        mailboxes: new Map([
          [A, mailbox({ want: 1_000_000, home: B2 })],
          [B2, mailbox({ want: 1_000_000, atMs: NOW - config.ackFreshMs - 1 })],
        ]),
      }),
      config,
    );
    expect(d.granted).toEqual({});
  });

  it('after a budget cut below Σ a grants nothing until releases bring Σ a under the budget', () => {
    const mailboxes = new Map([
      [A, mailbox({ want: 3_000_000, seenG: 2_500_000 })],
      [B2, mailbox({ want: 3_000_000, seenG: 2_500_000 })],
    ]);
    const current = entry({ g: { [A]: 2_500_000, [B2]: 2_500_000 } });
    expect(authorityStep(input({ current, mailboxes, budgetMicros: 4_000_000 }), config).granted).toEqual({});
    mailboxes.set(B2, mailbox({ want: 1_000_000, seenG: 2_500_000, rel: 2_000_000 }));
    const after = authorityStep(input({ current, mailboxes, budgetMicros: 4_000_000 }), config);
    // B2 holds 0.5 M and wants 1 M, A wants 0.5 M more: both fit the 1 M now free.
    expect(after.granted).toEqual({ [A]: 500_000, [B2]: 500_000 });
    expect(after.allocatedMicros).toBe(4_000_000);
  });

  it('reclaims a lost region only after ack + delay, down to what it provably spent', () => {
    const ack = NOW - reclaimDelayMs(config);
    const current = entry({ g: { [A]: 2_000_000, [B2]: 2_000_000 }, ack: { [A]: NOW + 60_000, [B2]: ack } });
    const mailboxes = new Map([[B2, mailbox({ spent: 900_000, rel: 500_000, atMs: ack - 60_000 })]]);
    const early = authorityStep(input({ current, mailboxes }), config);
    expect(early.reclaimable).toEqual([]);
    const due = authorityStep(input({ current, mailboxes, nowMs: NOW + 1 }), config);
    expect(due.reclaimable).toEqual([B2]);
    expect(due.reclaimed).toEqual({});
    const done = authorityStep(
      input({ current, mailboxes, nowMs: NOW + 1, confirmed: new Map([[B2, 1_200_000]]) }),
      config,
    );
    // a = 2.0 M − 0.5 M released = 1.5 M; it spent 1.2 M (ledger) ≥ 0.9 M reported.
    expect(done.reclaimed).toEqual({ [B2]: 300_000 });
    expect(allocatedOf(done.entry, B2, mailboxes.get(B2))).toBe(1_200_000);
    expect(done.entry.rb[B2]).toBe(500_000);
  });

  it('counts a report older than the reclaim at the release counter the reclaim used', () => {
    const e = entry({ g: { [A]: 2_000_000, [B2]: 2_000_000 }, x: { [B2]: 300_000 }, rb: { [B2]: 500_000 } });
    // The region released 400 k more before the reclaim, reported late: already reclaimed.
    const late = mailbox({ rel: 900_000, seenX: 0 });
    expect(allocatedOf(e, B2, late)).toBe(1_200_000);
    // Once it applied the reclaim it reports in the new counter epoch.
    expect(allocatedOf(e, B2, mailbox({ rel: 600_000, seenX: 300_000 }))).toBe(1_100_000);
  });

  it('a rehome starts from the latest authority only, and settles before granting or renewing', () => {
    const old0 = entry({ fence: 0, g: { [A]: 4_000_000, [B2]: 1_000_000 } });
    const pred = entry({ fence: 1, g: { [A]: 3_000_000, [B2]: 1_000_000 }, x: { [A]: 100 }, rb: { [A]: 7 } });
    const mailboxes = new Map([
      [A, mailbox({ want: 5_000_000, seenG: 3_000_000, fence: 2, home: B2, ae: NOW + 1_000 })],
      [B2, mailbox({ want: 5_000_000, seenG: 1_200_000, fence: 2, home: B2 })],
    ]);
    const settling = authorityStep(
      input({ home: B2, fence: 2, settleUntilMs: NOW + 30_000, prior: [old0, pred], mailboxes }),
      config,
    );
    // fence 0's superseded 4 M never comes back; what B2 applied (1.2 M) does.
    expect(settling.entry.g).toEqual({ [A]: 3_000_000, [B2]: 1_200_000 });
    expect(settling.entry.x[A]).toBe(100);
    expect(settling.granted).toEqual({});
    // leases are honoured, none renewed
    expect(settling.entry.ack[A]).toBe(NOW + 60_000);
    const settled = authorityStep(
      input({
        home: B2,
        fence: 2,
        nowMs: NOW + 30_000,
        settleUntilMs: NOW + 30_000,
        current: settling.entry,
        prior: [old0, pred],
        mailboxes,
      }),
      config,
    );
    expect(settled.entry.ack[A]).toBe(NOW + 30_000 + config.ackLeaseMs);
    // split by need, rounded down
    expect(settled.allocatedMicros).toBeGreaterThan(BUDGET - 3);
    expect(settled.allocatedMicros).toBeLessThanOrEqual(BUDGET);
  });

  it('an entry of another fence is not this fence: the step starts afresh from it as prior', () => {
    const d = authorityStep(
      input({ fence: 3, current: entry({ fence: 2 }), prior: [entry({ fence: 2 })] }),
      config,
    );
    expect(d.created).toBe(true);
    expect(d.entry.fence).toBe(3);
  });
});

describe('regionStep', () => {
  const region = {
    nowMs: NOW,
    budgetMicros: BUDGET,
    region: B2,
    fields: {},
    spentMicros: 0,
    expectedAtHorizonMicros: 0,
    dayStartMs: NOW - 3_600_000,
  };

  it('before any entry: the floor, and a lease from the plan-day start (or creation)', () => {
    const d = regionStep(region, config);
    expect(d.target).toEqual({
      ag: 250_000,
      ax: 0,
      ar: 0,
      ae: NOW - 3_600_000 + config.ackLeaseMs - config.skewMarginMs,
    });
    expect(d.write).toBe(true);
    const created = regionStep({ ...region, createdAtMs: NOW - 1_000 }, config);
    expect(created.target.ae).toBe(NOW - 1_000 + config.ackLeaseMs - config.skewMarginMs);
  });

  it('asks for what its curve lets it reach within the horizon, at most its demand, at least its keep', () => {
    const d = regionStep({ ...region, spentMicros: 1_000_000, expectedAtHorizonMicros: 1_600_000 }, config);
    expect(d.want).toBe(1_600_000);
    const demandBound = regionStep(
      { ...region, spentMicros: 1_000_000, expectedAtHorizonMicros: 1_600_000, demandMicrosPerSec: 1_000 },
      config,
    );
    expect(demandBound.want).toBe(1_000_000 + 120_000);
    const idle = regionStep({ ...region, demandMicrosPerSec: 0, expectedAtHorizonMicros: 5_000_000 }, config);
    expect(idle.want).toBe(keepOf(BUDGET, B2, config));
  });

  it('makes room for the float a guard was held back for within the horizon, and only then', () => {
    // A small plan: its curve reaches 3,000 µ$ above its spend within the horizon, a guard asked
    // for a float of 6,500 µ$ and the allocation held it back 30 s ago.
    const small = {
      ...region,
      budgetMicros: 1_000_000,
      spentMicros: 200_000,
      expectedAtHorizonMicros: 203_000,
      demandMicrosPerSec: 100,
    };
    expect(regionStep(small, config).want).toBe(203_000);
    const held = regionStep({ ...small, fields: { ac: NOW - 30_000, aw: 6_500 } }, config);
    expect(held.want).toBe(206_500);
    // held back longer ago than the horizon: the float is not waited for any more
    const old = regionStep({ ...small, fields: { ac: NOW - config.horizonMs - 1, aw: 6_500 } }, config);
    expect(old.want).toBe(203_000);
  });

  it('releases what it holds beyond headroom × (1 + hysteresis), never for less', () => {
    const fields = { ag: 250_000, ar: 0, ax: 0, ae: NOW + 60_000, a: 250_000 };
    const idle = regionStep({ ...region, fields, demandMicrosPerSec: 0 }, config);
    expect(idle.lowerTo).toBe(12_500);
    const busy = regionStep(
      { ...region, fields, spentMicros: 100_000, expectedAtHorizonMicros: 200_000 },
      config,
    );
    expect(busy.lowerTo).toBeUndefined();
    // not while its guards may still lease the floor by default (a plan created a minute ago)
    const fresh = regionStep({ ...region, fields, demandMicrosPerSec: 0, createdAtMs: NOW - 60_000 }, config);
    expect(fresh.lowerTo).toBeUndefined();
  });

  it('restores a Redis that lost its fields from the entry and its own last report', () => {
    const e = entry({ g: { [B2]: 3_000_000 }, ack: { [B2]: NOW + 90_000 } });
    const own = { rel: 400_000, seenX: 0, seenG: 3_100_000, ae: NOW + 1_000 };
    const d = regionStep({ ...region, entry: e, ownMailbox: own }, config);
    // what it applied before the reset (a grant of an entry not visible here any more) is kept
    expect(d.target).toEqual({ ag: 3_100_000, ax: 0, ar: 400_000, ae: NOW + 90_000 - config.skewMarginMs });
  });

  it('applies a reclaim: its counter restarts at the one the reclaim used', () => {
    const e = entry({ g: { [B2]: 2_000_000 }, x: { [B2]: 300_000 }, rb: { [B2]: 500_000 } });
    const fields = { ag: 2_000_000, ar: 900_000, ax: 0, ae: NOW - 1, a: 1_100_000 };
    const d = regionStep({ ...region, entry: e, fields }, config);
    expect(syncAllocation(fields, d.target)).toMatchObject({ ax: 300_000, ar: 500_000, a: 1_200_000 });
  });
});

describe('syncAllocation', () => {
  it('never lowers ag or ae and compares (ax, ar) as a pair: an older writer cannot raise a cap', () => {
    const current = { ag: 1_000, ar: 300, ax: 0, ae: 50, a: 700 };
    expect(syncAllocation(current, { ag: 900, ar: 100, ax: 0, ae: 40 })).toEqual(current);
    expect(syncAllocation(current, { ag: 1_200, ar: 300, ax: 0, ae: 60 })).toEqual({
      ag: 1_200,
      ar: 300,
      ax: 0,
      ae: 60,
      a: 900,
    });
    expect(syncAllocation(current, { ag: 1_000, ar: 100, ax: 50, ae: 50 })).toMatchObject({
      ax: 50,
      ar: 100,
      a: 850,
    });
    expect(syncAllocation({}, { ag: 5, ar: 1, ax: 2, ae: 3 })).toEqual({ ag: 5, ar: 1, ax: 2, ae: 3, a: 2 });
  });
});
