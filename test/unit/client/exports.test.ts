/**
 * The public client entry (`paceline/client` = packages/client/src/index.ts) exports exactly the
 * factory, its configuration, the request path's types, the notice and event encodings, and the
 * errors (docs/client.md, "What the entry exports") — no ioredis, clocks, repositories or the
 * client's building blocks. The list is pinned: an addition or removal is a decision to make
 * here. Every exported error is a PacelineError.
 */
import { fileURLToPath } from 'node:url';
import type ts from 'typescript';
import { describe, expect, it } from 'vitest';
import * as entry from '../../../packages/client/src/index.js';
import { PacelineError } from '../../../shared/errors.js';
import { strictProgram } from '../../support/typescript.js';

const index = fileURLToPath(new URL('../../../packages/client/src/index.ts', import.meta.url));

/** Every name the entry exports (values and types), from the TypeScript checker. */
function exportedNames(): string[] {
  const program = strictProgram([index]);
  const checker = program.getTypeChecker();
  const file = program.getSourceFile(index) as ts.SourceFile;
  const module = checker.getSymbolAtLocation(file) as ts.Symbol;
  return checker
    .getExportsOfModule(module)
    .map((s) => s.getName())
    .sort();
}

const VALUES = [
  // the factory and its configuration
  'createPacelineClient',
  'configFromEnv',
  'resourcesFromEnv',
  // notices and events on the wire, and the constants of the request path's types
  'ACTIONS',
  'AUCTION_LOSS_MACRO',
  'AUCTION_PRICE_MACRO',
  'VIEW_TYPES',
  'auctionPriceToMicros',
  'encodeActionEvent',
  'encodeSpendEvent',
  'fillPod',
  'noticeEvent',
  'noticeUrls',
  'spendPartitionKey',
  // errors
  'CampaignRemovedError',
  'IamAuthTokenError',
  'InvalidActionStoreOptionsError',
  'InvalidActionFieldError',
  'InvalidBidInputError',
  'InvalidClientConfigError',
  'InvalidCountQueryError',
  'InvalidEnvError',
  'InvalidGuardOptionsError',
  'InvalidRedisConfigError',
  'InvalidShardCountError',
  'KinesisPutError',
  'LocalEndpointMissingError',
  'MissingEnvError',
  'NoticeUrlError',
  'PacelineError',
  'RawConnectionError',
  'RawProtocolError',
  'RawReadTimeoutError',
  'RawRedisAuthError',
  'RawRedisError',
  'RawReplyError',
  'RawScriptError',
  'RebuildUnavailableError',
  'SlotMismatchError',
  'UnreadableEventLogError',
];

const TYPES = [
  'Account',
  'ActionEvent',
  'AwsEndpoints',
  'BidEvent',
  'BidInput',
  'BidOutcome',
  'BudgetPlan',
  'Campaign',
  'CampaignBudgets',
  'CapCandidate',
  'CapCheckRequest',
  'CapCheckResult',
  'CapRule',
  'ClientMetrics',
  'ClientResources',
  'DecisionOutcome',
  'DecisionRecord',
  'FrequencyCap',
  'RecencyCap',
  'LifetimeCap',
  'ConversionCap',
  'RequestIdentities',
  'NoIdentityPolicy',
  'NoIdentityReport',
  'PodFill',
  'PodRules',
  'LossEvent',
  'MetricsHooks',
  'NoticeBid',
  'NoticeKind',
  'NoticeUrls',
  'PacelineClient',
  'PacelineClientConfig',
  'PacingMode',
  'PacingStatus',
  'RedisConfig',
  'SpendEvent',
  'TrackResult',
  'WinEvent',
];

describe('paceline/client exports', () => {
  it('exactly the pinned names (values and types)', () => {
    expect(exportedNames()).toEqual([...VALUES, ...TYPES].sort());
  }, 120_000);

  it('exactly the pinned values at run time, with no connection, clock or repository among them', () => {
    expect(Object.keys(entry).sort()).toEqual([...VALUES].sort());
    for (const gone of [
      'connectRedis',
      'redisConfigFromEnv',
      'RedisClient',
      'ManualClock',
      'systemClock',
      'Clock',
      'BudgetRepository',
      'ActionStore',
      'BudgetGuard',
      'PacingReader',
      'KinesisProducer',
      'regionResources',
    ]) {
      expect(Object.keys(entry)).not.toContain(gone);
    }
  });

  it('every exported error is a PacelineError', () => {
    const errors = Object.entries(entry).filter(([name]) => name.endsWith('Error'));
    expect(errors).toHaveLength(VALUES.filter((v) => v.endsWith('Error')).length);
    for (const [name, value] of errors) {
      const cls = value as abstract new (...args: never[]) => unknown;
      expect(cls === PacelineError || cls.prototype instanceof PacelineError, name).toBe(true);
    }
  });
});
