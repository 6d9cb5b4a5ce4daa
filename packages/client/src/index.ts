/**
 * `paceline/client` — the public entry point for ad servers (docs/client.md, "What the entry
 * exports"). One factory, {@link createPacelineClient}, wires the whole request path from a
 * region's environment ({@link configFromEnv}) or explicit options. Besides it: its
 * configuration, the types of the request path (and the constants that spell their values), the
 * notice and event encodings of the published contracts (pure functions, for a notice endpoint
 * or producer without a client), and the errors — every one a PacelineError with a stable
 * `code`. Not here: connections (ioredis), clocks, repositories, the client's building blocks
 * (reached through a client: `paceline.actions`, `.guard`, `.pacing`) and the region
 * description. `test/unit/client/exports.test.ts` pins the list. Nothing here imports the CDK or
 * the emulators.
 */

export type { AwsEndpoints } from '../../../shared/aws/endpoints.js';
export { LocalEndpointMissingError } from '../../../shared/aws/endpoints.js';
export type {
  Account,
  BudgetPlan,
  Campaign,
  CampaignBudgets,
  PacingMode,
} from '../../../shared/budget/model.js';
export {
  type BidInput,
  type BidOutcome,
  createPacelineClient,
  InvalidBidInputError,
  type PacelineClient,
  type TrackResult,
} from '../../../shared/client/client.js';
export {
  type ClientResources,
  configFromEnv,
  InvalidClientConfigError,
  type MetricsHooks,
  type PacelineClientConfig,
  resourcesFromEnv,
} from '../../../shared/client/config.js';
export type { ClientMetrics, DecisionOutcome, DecisionRecord } from '../../../shared/client/metrics.js';
export {
  AUCTION_LOSS_MACRO,
  AUCTION_PRICE_MACRO,
  type NoticeBid,
  type NoticeKind,
  NoticeUrlError,
  type NoticeUrls,
  noticeEvent,
  noticeUrls,
  spendPartitionKey,
} from '../../../shared/client/notices.js';
export { CampaignRemovedError } from '../../../shared/client/parts.js';
export { InvalidEnvError, MissingEnvError } from '../../../shared/config/env.js';
export type { RequestIdentities } from '../../../shared/counting/cap-keys.js';
export {
  type ActionEvent,
  encodeActionEvent,
  InvalidActionFieldError,
} from '../../../shared/counting/event-encode.js';
export type { NoIdentityPolicy, NoIdentityReport } from '../../../shared/counting/identities.js';
export { fillPod, type PodFill, type PodRules } from '../../../shared/counting/pods.js';
export type {
  CapCandidate,
  CapCheckResult,
  CapRule,
  ConversionCap,
  FrequencyCap,
  LifetimeCap,
  RecencyCap,
} from '../../../shared/counting/query.js';
export { InvalidCountQueryError, UnreadableEventLogError } from '../../../shared/counting/query.js';
export { ACTIONS, VIEW_TYPES } from '../../../shared/counting/schema.js';
export { type CapCheckRequest, InvalidActionStoreOptionsError } from '../../../shared/counting/store.js';
export { PacelineError } from '../../../shared/errors.js';
export { KinesisPutError } from '../../../shared/kinesis/producer.js';
export type { PacingStatus } from '../../../shared/pacing/reader.js';
export { InvalidShardCountError } from '../../../shared/pacing/shard.js';
export { InvalidRedisConfigError, type RedisConfig } from '../../../shared/redis/connect.js';
export { IamAuthTokenError } from '../../../shared/redis/iam-auth.js';
export {
  RawConnectionError,
  RawProtocolError,
  RawReadTimeoutError,
  RawRedisAuthError,
  RawRedisError,
  RawReplyError,
  RawScriptError,
} from '../../../shared/redis/resp/errors.js';
export type { BidEvent, LossEvent, SpendEvent, WinEvent } from '../../../shared/spend/events.js';
export { auctionPriceToMicros, encodeSpendEvent } from '../../../shared/spend/events.js';
export { InvalidGuardOptionsError, SlotMismatchError } from '../../../shared/spend/guard.js';
export { RebuildUnavailableError } from '../../../shared/spend/reconcile.js';
