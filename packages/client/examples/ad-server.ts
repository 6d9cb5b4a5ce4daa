/**
 * An ad server's request path on Paceline, end to end, using only the public client entry
 * (`paceline/client`), against the region its environment names:
 *
 *   npm start                                   # in one shell
 *   source .paceline/us-east-1.env              # in another (or paste the printed "Client env")
 *   npx tsx packages/client/examples/ad-server.ts [--requests 20] [--campaign example-campaign]
 *
 * Per request: frequency-cap check → pacing read → budget guard → bid → the exchange's win or
 * loss notice (simulated here: it calls the nurl/lurl with ${AUCTION_PRICE} substituted) →
 * events (the notice's spend event, an impression for a win). The last line printed is a JSON
 * summary (with how many bids had fresh pacing parameters, and why the others used the
 * fail-safe). The campaign (default `example-campaign`) must exist: an ad server only reads
 * budgets (its access policy has no write to the budgets table), so the operator creates it — the
 * command lines are printed when it is missing.
 */
import { parseArgs } from 'node:util';
import {
  AUCTION_LOSS_MACRO,
  AUCTION_PRICE_MACRO,
  type CapCandidate,
  configFromEnv,
  createPacelineClient,
  type PacingStatus,
} from 'paceline/client';

const { values } = parseArgs({
  options: {
    requests: { type: 'string', default: '20' },
    campaign: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  },
});
if (values.help) {
  console.log(
    'usage: npx tsx packages/client/examples/ad-server.ts [--requests N] [--campaign ID]  (region from the environment)',
  );
  process.exit(0);
}
const requests = Number(values.requests);

/** How the operator creates the demo campaign (an ad server's role cannot write budgets). */
const demoCampaignSetup = [
  'npm run budgets -- account put --id example-account --name "Example advertiser" --tz America/New_York',
  'npm run budgets -- campaign put --id example-campaign --account example-account --name "Example campaign"',
  'npm run budgets -- plan put --level campaign --account example-account --campaign example-campaign --daily-budget 1000 --pacing even',
];

/** The campaign to bid for does not exist (exit 2 with how to create it). */
class MissingCampaignError extends Error {}

/**
 * Why decisions used the fail-safe, in one line (or undefined when every one had fresh
 * parameters). Only the pacer writes pacing parameters — one fenced writer per shard and tick
 * (docs/pacing.md) — so neither the budgets write nor the first lookup can publish them: a new
 * campaign is paced by the fail-safe until the pacer's next tick publishes its first ones (≤ one
 * 10 s tick, then the reader's next refresh). The fail-safe bids on every request at the base
 * price, and the budget guard holds spend to the linear E(t): it never overspends.
 */
function failSafeNote(campaignId: string, pacing: Record<PacingStatus, number>): string | undefined {
  const failSafe = pacing.stale + pacing.missing;
  if (failSafe === 0) return undefined;
  const total = failSafe + pacing.fresh;
  const why =
    pacing.missing > 0
      ? `campaign ${campaignId} had no published parameters yet: the pacer publishes a new campaign's first ones at its next tick (every 10 s; is it running?), and only the pacer writes them`
      : `its parameters were older than 3 ticks: is the pacer running?`;
  return `pacing: ${failSafe} of ${total} decisions used the fail-safe (throttle 1, multiplier 1; the budget guard holds spend to the linear E(t)) because ${why}.`;
}

// 1. One client per process, from the region's environment.
const client = await createPacelineClient(
  configFromEnv(process.env, { noticeBaseUrl: 'http://localhost:8080/notice' }),
);
const summary = {
  requests: 0,
  capped: 0,
  bids: 0,
  noBid: {} as Record<string, number>,
  wins: 0,
  losses: 0,
  // The pacing status behind each decision: fresh parameters, or the fail-safe (stale, missing).
  pacing: { fresh: 0, stale: 0, missing: 0 } as Record<PacingStatus, number>,
};
try {
  const campaignId = values.campaign ?? 'example-campaign';
  // 2. Track the campaigns this server bids for: budgets loaded, floats leased, pacing read.
  const { unknown } = await client.track([campaignId]);
  if (unknown.length > 0) {
    const setup = values.campaign ? [] : ['Create the demo campaign as the operator:', ...demoCampaignSetup];
    throw new MissingCampaignError(
      [`Campaign ${campaignId} is not in the budgets table.`, ...setup].join('\n  '),
    );
  }

  for (let i = 0; i < requests; i++) {
    summary.requests++;
    const userId = 1_000 + (i % 7);
    const ad = { ad: '11', adGroup: '7', campaign: '3', advertiser: '1' };
    // 3. Frequency cap: at most 3 impressions of this campaign per user and hour.
    const candidate: CapCandidate = {
      id: 'ad-11',
      entities: ad,
      caps: [{ level: 'campaign', windowMs: 3_600_000, max: 3 }],
    };
    const caps = await client.checkFrequencyCaps({ userId: String(userId), candidates: [candidate] });
    if (caps.allowed.length === 0) {
      summary.capped++;
      continue;
    }
    // 4. Pacing read + budget guard + paced price, synchronously.
    const outcome = client.bid({
      bidId: `ex-${Date.now().toString(36)}-${i}`,
      campaignId,
      basePriceMicros: 2_000, // $2 CPM
    });
    summary.pacing[outcome.pacing]++;
    if (!outcome.bid) {
      summary.noBid[outcome.reason] = (summary.noBid[outcome.reason] ?? 0) + 1;
      continue;
    }
    summary.bids++;
    // 5. The bid response carries outcome.notices.{nurl,burl,lurl}; here the "exchange" answers
    //    at once: every other bid wins at 80 % of the price (second price), the rest lose.
    const notices = outcome.notices as NonNullable<typeof outcome.notices>;
    if (i % 2 === 0) {
      const cpm = ((outcome.priceMicros * 0.8) / 1000).toFixed(4);
      // 6. Your notice endpoint hands the URL the exchange called to the client: a spend event.
      client.sendNotice(notices.nurl.replace(AUCTION_PRICE_MACRO, cpm));
      client.sendAction({
        userId,
        timestamp: Date.now(),
        insertionId: crypto.randomUUID(),
        action: 'impression',
        ...ad,
      });
      summary.wins++;
    } else {
      client.sendNotice(notices.lurl.replace(AUCTION_LOSS_MACRO, '102'));
      summary.losses++;
    }
  }
  // 7. Events are batched in the background; flush before exiting.
  await client.flush();
  const note = failSafeNote(campaignId, summary.pacing);
  if (note) console.log(note);
  console.log(
    JSON.stringify({
      ...summary,
      campaignId,
      ...(note ? { pacingNote: note } : {}),
      metrics: client.metrics(),
    }),
  );
} catch (error) {
  if (!(error instanceof MissingCampaignError)) throw error;
  console.error(error.message);
  process.exitCode = 2;
} finally {
  await client.close();
}
