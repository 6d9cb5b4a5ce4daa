/**
 * The flight closer's write (shared/budget/flight.ts): one closed day of a flight plan into the
 * plan item's `flightSpent` map. Only that day's entry is set (a nested path), so a concurrent
 * close of another day or a rehome is kept; version and updatedAt are bumped, so every pacer and
 * guard cache reloads the plan and the next days' budgets follow.
 */
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { BudgetsTable, PlanRef } from './allocation-home.js';
import { planKey } from './repository.js';

/**
 * Records `micros` as the flight day's spend, summed at `now`. False when the plan no longer
 * exists or has no flight (nothing written).
 */
export async function recordFlightDay(
  t: BudgetsTable,
  plan: PlanRef,
  day: string,
  micros: number,
  now: number,
): Promise<boolean> {
  const doc = DynamoDBDocumentClient.from(t.client);
  const closed = { micros, at: now };
  const common = {
    TableName: t.tableName,
    Key: planKey(plan),
    ExpressionAttributeNames: { '#fs': 'flightSpent' },
  };
  const bump = 'updatedAt = :now, version = version + :one';
  try {
    await doc.send(
      new UpdateCommand({
        ...common,
        UpdateExpression: `SET #fs.#d = :c, ${bump}`,
        ConditionExpression: 'attribute_exists(flight) AND attribute_exists(#fs)',
        ExpressionAttributeNames: { ...common.ExpressionAttributeNames, '#d': day },
        ExpressionAttributeValues: { ':c': closed, ':now': now, ':one': 1 },
      }),
    );
    return true;
  } catch (error) {
    if (!(error instanceof ConditionalCheckFailedException)) throw error;
  }
  // The plan's first closed day: the map does not exist yet.
  try {
    await doc.send(
      new UpdateCommand({
        ...common,
        UpdateExpression: `SET #fs = :m, ${bump}`,
        ConditionExpression: 'attribute_exists(flight) AND attribute_not_exists(#fs)',
        ExpressionAttributeValues: { ':m': { [day]: closed }, ':now': now, ':one': 1 },
      }),
    );
    return true;
  } catch (error) {
    if (!(error instanceof ConditionalCheckFailedException)) throw error;
    return false;
  }
}
