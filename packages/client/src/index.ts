/**
 * `paceline/client` — the public entry point for ad servers (docs/client.md). One factory,
 * {@link createPacelineClient}, wires the whole request path from a region's environment
 * ({@link configFromEnv}) or explicit options; the building blocks are exported for callers who
 * need them directly. Nothing here imports the CDK or the emulators.
 */
export type { AwsEndpoints } from '../../../shared/aws/endpoints.js';
export type {
  Account,
  BudgetPlan,
  Campaign,
  CampaignBudgets,
  PacingMode,
} from '../../../shared/budget/model.js';
export { BudgetRepository } from '../../../shared/budget/repository.js';
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
export { InvalidEnvError, MissingEnvError } from '../../../shared/config/env.js';
export type { CapCandidate, CapCheckResult, CapRule, FrequencyCap } from '../../../shared/counting/query.js';
export { ACTIONS, type ActionEvent, encodeActionEvent, VIEW_TYPES } from '../../../shared/counting/schema.js';
export { ActionStore, type CapCheckRequest } from '../../../shared/counting/store.js';
export { KinesisProducer, KinesisPutError } from '../../../shared/kinesis/producer.js';
export { PacingReader, type PacingStatus, publishedCurve } from '../../../shared/pacing/reader.js';
export {
  connectRedis,
  type RedisClient,
  type RedisConfig,
  redisConfigFromEnv,
} from '../../../shared/redis/connect.js';
export { RawReadTimeoutError } from '../../../shared/redis/raw-connection.js';
export { regionResources, resourceName } from '../../../shared/region/resources.js';
export {
  auctionPriceToMicros,
  type BidEvent,
  encodeSpendEvent,
  type LossEvent,
  type SpendEvent,
  type WinEvent,
} from '../../../shared/spend/events.js';
export { BudgetGuard, type Decision } from '../../../shared/spend/guard.js';
export { type Clock, ManualClock, systemClock } from '../../../shared/time/clock.js';
