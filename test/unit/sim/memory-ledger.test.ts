import { describe, expect, it } from 'vitest';
import { prng } from '../../../shared/random/prng.js';
import type { LedgerEntry } from '../../../shared/spend/ledger.js';
import { memoryLedger } from '../../../sim/engine-parts.js';

/** The ledger contract as plain maps of entry objects: what the columnar ledger must equal. */
function referenceLedger() {
  const days = new Map<string, Map<string, LedgerEntry>>();
  return {
    record(entry: LedgerEntry) {
      const key = `${entry.campaignId}#${entry.day}`;
      let day = days.get(key);
      if (!day) {
        day = new Map();
        days.set(key, day);
      }
      const stored = day.get(entry.bidId);
      if (stored) return { created: false, entry: stored, own: true };
      day.set(entry.bidId, entry);
      return { created: true, entry, own: true };
    },
    entries(campaignId: string, day: string, armId?: string) {
      const all = [...(days.get(`${campaignId}#${day}`)?.values() ?? [])];
      return armId === undefined ? all : all.filter((e) => e.armId === armId);
    },
  };
}

describe('memoryLedger (columns per campaign-day)', () => {
  it('equals a map of entry objects: first write wins, entries in booking order, per arm, any bid id form', async () => {
    const random = prng(11);
    const pick = <T>(list: readonly T[]): T => list[Math.floor(random() * list.length)] as T;
    // Numbered ids (the simulator's form) mixed with ids the index keys by text: another
    // prefix, leading zeros, beyond 15 digits, no digits, empty, digits only.
    const idOf = () =>
      random() < 0.7
        ? `b${Math.floor(random() * 400)}`
        : pick(['x7', 'b007', 'b0', '0', '12', `b${'9'.repeat(16)}`, 'bid', '', 'b-1', 'b1.5', 'B12']);
    const ledger = memoryLedger();
    const reference = referenceLedger();
    const campaigns = ['c1', 'c2'];
    const days = ['2026-03-04', '2026-03-05'];
    for (let i = 0; i < 5000; i++) {
      const armId = pick([undefined, 'A', 'B']);
      const entry: LedgerEntry = {
        campaignId: pick(campaigns),
        accountId: pick(['acct1', 'acct2']),
        ...(armId === undefined ? {} : { armId }),
        bidId: idOf(),
        day: pick(days),
        clearingPriceMicros: Math.floor(random() * 2 ** 40),
        bidPriceMicros: Math.floor(random() * 5000) + 1,
        bidAt: Date.UTC(2026, 2, 4) + Math.floor(random() * 2 * 86_400_000),
        noticeAt: Date.UTC(2026, 2, 4) + Math.floor(random() * 2 * 86_400_000) + 0.5,
        late: random() < 0.1,
      };
      expect(await ledger.record(entry)).toStrictEqual(reference.record(entry));
    }
    for (const c of [...campaigns, 'c3']) {
      for (const d of days) {
        for (const arm of [undefined, 'A', 'B', 'C']) {
          const got = await ledger.entries(c, d, arm);
          expect(got).toStrictEqual(reference.entries(c, d, arm));
        }
      }
    }
    expect((await ledger.entries('c1', days[0] as string)).length).toBeGreaterThan(300);
  });

  it('marks a plan-day started once', async () => {
    const ledger = memoryLedger();
    expect(await ledger.markPlanDayStarted('campaign', 'c1', '2026-03-04', 0)).toBe(true);
    expect(await ledger.markPlanDayStarted('campaign', 'c1', '2026-03-04', 0)).toBe(false);
    expect(await ledger.markPlanDayStarted('account', 'c1', '2026-03-04', 0)).toBe(true);
  });
});
