/**
 * A plan's allocation authority in the budgets table (docs/pacing.md, "Home loss and rehome"):
 * reading a plan item as stored, and moving its authority to another region — the only writer of
 * `allocHome`, `allocFence` and `allocSettleUntil` (a plan write keeps them).
 */
import { ConditionalCheckFailedException, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { type BudgetPlan, planIdOf } from './model.js';
import { BudgetConflictError, planKey, strip, type Versioned } from './repository.js';

/** Which plan (its key fields). */
export type PlanRef = Pick<BudgetPlan, 'level' | 'accountId' | 'campaignId' | 'armId'>;

/** The budgets table (this region's replica). */
export interface BudgetsTable {
  readonly client: DynamoDBClient;
  readonly tableName: string;
}

/** One plan as stored, or undefined. */
export async function getPlan(t: BudgetsTable, plan: PlanRef): Promise<Versioned<BudgetPlan> | undefined> {
  const doc = DynamoDBDocumentClient.from(t.client);
  const out = await doc.send(
    new GetCommand({ TableName: t.tableName, Key: planKey(plan), ConsistentRead: true }),
  );
  return out.Item ? strip<Versioned<BudgetPlan>>(out.Item) : undefined;
}

/**
 * Moves a plan's allocation authority to `home`: allocHome = home, allocFence = fence + 1,
 * allocSettleUntil = settleUntil, conditional on the fence still being `fence` in this replica (a
 * concurrent rehome loses with {@link BudgetConflictError}). Bumps version and updatedAt, so
 * pacers pick the change up within a tick.
 */
export async function rehomePlan(
  t: BudgetsTable,
  plan: PlanRef,
  home: string,
  fence: number,
  settleUntil: number,
  now: number,
): Promise<Versioned<BudgetPlan>> {
  const doc = DynamoDBDocumentClient.from(t.client);
  try {
    const out = await doc.send(
      new UpdateCommand({
        TableName: t.tableName,
        Key: planKey(plan),
        UpdateExpression:
          'SET allocHome = :h, allocFence = :nf, allocSettleUntil = :s, updatedAt = :now, version = version + :one',
        ConditionExpression:
          'attribute_exists(pk) AND (allocFence = :f OR (attribute_not_exists(allocFence) AND :f = :zero))',
        ExpressionAttributeValues: {
          ':h': home,
          ':nf': fence + 1,
          ':f': fence,
          ':s': settleUntil,
          ':now': now,
          ':one': 1,
          ':zero': 0,
        },
        ReturnValues: 'ALL_NEW',
      }),
    );
    return strip<Versioned<BudgetPlan>>(out.Attributes ?? {});
  } catch (error) {
    if (error instanceof ConditionalCheckFailedException) {
      throw new BudgetConflictError(
        `plan ${planIdOf(plan)} was rehomed concurrently (its fence is no longer ${fence}): list it again and decide.`,
        { cause: error },
      );
    }
    throw error;
  }
}
