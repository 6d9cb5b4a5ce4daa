/**
 * Physical names of a deployment's resources, derived from its stage (`paceline:stage` in
 * cdk.json). Every name the CDK stack gives a resource — tables, streams, functions, queues, log
 * groups, the KMS alias, the SSM parameter root, the cache's replication group and IAM user, the
 * ad-server managed policy, the dashboard, the pacer's scheduling rules, the stack itself — comes
 * from here, so two stages fit one account and region without a name in common.
 *
 * The default stage (none) keeps the names the local runner, the CLI and the client library use
 * (`paceline-<suffix>`, `/paceline/<region>/`, …). A stage puts itself in front:
 * `<stage>-paceline-<suffix>`, `/<stage>-paceline/<region>/`. Names of one stage therefore never
 * equal names of another or of the default stage: they start with `<stage>-paceline`, a stage
 * never contains `paceline`, and no described suffix starts with `paceline`.
 *
 * Data plus pure functions; nothing here touches AWS.
 */
import { errorKind } from '../errors.js';

/** What a stage may look like: lowercase letters, digits, single hyphens; starts with a letter. */
export const STAGE_PATTERN = /^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$/;

/**
 * Longest stage: the longest derived name limited by AWS is the cache's disabled default user id
 * (`<stage>-paceline-app-default-off`, ElastiCache allows 40 characters).
 */
export const MAX_STAGE_LENGTH = 12;

/** Thrown for a stage that cannot prefix every name; the message says why and what to give. */
export class InvalidStageError extends errorKind('InvalidStageError', 'region.invalid-stage') {}

/**
 * Validates a stage name (lowercase letters, digits, hyphens; 1–12 characters; starting with a
 * letter; not containing `paceline`; not starting with `aws`, which KMS reserves for aliases).
 * @throws InvalidStageError naming what is wrong
 */
export function validateStage(stage: string): string {
  const fix = `give 1–${MAX_STAGE_LENGTH} lowercase letters, digits or single hyphens, starting with a letter (e.g. "staging"), or leave it out for the default names.`;
  if (!STAGE_PATTERN.test(stage) || stage.length > MAX_STAGE_LENGTH)
    throw new InvalidStageError(`${JSON.stringify(stage)}: ${fix}`);
  if (stage.includes('paceline'))
    throw new InvalidStageError(
      `${JSON.stringify(stage)} contains "paceline", which every name already carries: another stage's names could then equal this one's. Choose another.`,
    );
  if (stage.startsWith('aws'))
    throw new InvalidStageError(
      `${JSON.stringify(stage)} starts with "aws": KMS reserves alias names starting alias/aws. Choose another.`,
    );
  return stage;
}

/** The physical names of one stage (see {@link stageNames}). */
export interface ResourceNames {
  /** The stage, or undefined for the default names. */
  readonly stage: string | undefined;
  /** `paceline`, or `<stage>-paceline`: what every name starts with. */
  readonly base: string;
  /** CloudFormation stack of a region: `Paceline-<region>` or `Paceline-<stage>-<region>`. */
  stackName(region: string): string;
  /** A table's or stream's name from its described suffix: `<base>-<suffix>`. */
  resource(suffix: string): string;
  /** A function's name from its described name: `<base>-<name>`. */
  functionName(name: string): string;
  /** A function's log group: `/aws/lambda/<function name>`. */
  logGroupName(name: string): string;
  /** A stream function's on-failure queue (`dead-letters redrive` finds it by name). */
  onFailureQueueName(name: string): string;
  /** Root of every SSM parameter of the deployment: `/<base>/`. */
  readonly parameterRoot: string;
  /** SSM prefix of one region's parameters: `/<base>/<region>/`. */
  parameterPrefix(region: string): string;
  /** Alias of each region's data key (replica keys of global tables are named by it). */
  readonly keyAliasName: string;
  /** The cache's replication group id (same in every region; peers discover it by this id). */
  readonly cacheReplicationGroupId: string;
  /** The cache's IAM-authenticated user (user id = user name). */
  readonly cacheUserId: string;
  /** The ad-server managed policy of a region. */
  adServerPolicyName(region: string): string;
  /** The dashboard of a region. */
  dashboardName(region: string): string;
  /**
   * A pacer scheduling rule: instance `instance` of the shards from `firstShard` on. The `.`
   * cannot occur in a stage, so {@link pacerRulePattern} of one stage matches no other's rule.
   */
  pacerRuleName(instance: number, firstShard: number): string;
  /** Matches every pacer rule of this stage (the pacer's one invoke permission). */
  readonly pacerRulePattern: string;
  /** The VPC flow-log group of a region's stack. */
  readonly flowLogGroupName: string;
}

/** The names of `stage` (undefined: the default names). @throws InvalidStageError */
export function stageNames(stage?: string): ResourceNames {
  if (stage !== undefined) validateStage(stage);
  const base = stage === undefined ? 'paceline' : `${stage}-paceline`;
  return {
    stage,
    base,
    stackName: (region) => (stage === undefined ? `Paceline-${region}` : `Paceline-${stage}-${region}`),
    resource: (suffix) => `${base}-${suffix}`,
    functionName: (name) => `${base}-${name}`,
    logGroupName: (name) => `/aws/lambda/${base}-${name}`,
    onFailureQueueName: (name) => `${base}-${name}-on-failure`,
    parameterRoot: `/${base}/`,
    parameterPrefix: (region) => `/${base}/${region}/`,
    keyAliasName: `alias/${base}`,
    cacheReplicationGroupId: base,
    cacheUserId: `${base}-app`,
    adServerPolicyName: (region) => `${base}-ad-server-${region}`,
    dashboardName: (region) => `${base}-${region}`,
    pacerRuleName: (instance, firstShard) => `${base}-pacer.i${instance}.s${firstShard}`,
    pacerRulePattern: `${base}-pacer.*`,
    flowLogGroupName: `/${base}/vpc-flow-logs`,
  };
}

/** The default stage's names: what the local runner, the CLI and the client library use. */
export const defaultNames: ResourceNames = stageNames();
