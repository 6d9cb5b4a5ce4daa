import { describe, expect, it } from 'vitest';
import { InvalidEnvError } from '../../../shared/config/env.js';
import { defaultSpendLimits } from '../../../shared/spend/events.js';
import { LEDGER_RETENTION_DAYS } from '../../../shared/spend/ledger.js';
import { MAX_BID_AGE_LIMIT_MS, spendSettingsFromEnv } from '../../../shared/spend/runtime.js';

describe('spend settings from the environment', () => {
  it('keeps the booking window inside the ledger retention, so no rebuild reads a day TTL may have thinned', () => {
    expect(spendSettingsFromEnv({}).limits.maxBidAgeMs).toBe(defaultSpendLimits.maxBidAgeMs);
    const ok = spendSettingsFromEnv({ SPEND_MAX_BID_AGE_MS: String(MAX_BID_AGE_LIMIT_MS) });
    expect(ok.limits.maxBidAgeMs).toBe(MAX_BID_AGE_LIMIT_MS);
    // A notice a whole retention old would book into (and rebuild) a day whose first wins expired.
    const tooOld = String(LEDGER_RETENTION_DAYS * 86_400_000);
    expect(() => spendSettingsFromEnv({ SPEND_MAX_BID_AGE_MS: tooOld })).toThrow(InvalidEnvError);
    expect(() => spendSettingsFromEnv({ SPEND_MAX_BID_AGE_MS: tooOld })).toThrow(
      /SPEND_MAX_BID_AGE_MS=.*at most \d+ ms \(398 days\)/,
    );
  });
});
