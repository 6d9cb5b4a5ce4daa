/**
 * How EventBridge delivers a `rate(1 minute)` schedule to an asynchronously invoked Lambda
 * function: the model the local scheduler reproduces (`local/scheduler.ts`) and the pacer's
 * invocation window is built to cover (`shared/pacing/invocation.ts`). One place, so the two
 * cannot disagree.
 *
 * What AWS documents, and what we choose where it gives no figure:
 * - A rate rule fires at its own second within the minute (set when the rule is created), not on
 *   the minute; EventBridge Scheduler documents 60 s precision ("between 1:00:00 and 1:00:59").
 * - Delivery is asynchronous and at least once: Lambda's asynchronous queue "occasionally" hands
 *   the same event to the function more than once, and drops events it cannot deliver in time.
 *   AWS gives no rates. We model a delivery delay after the rule's second of up to
 *   {@link SCHEDULE_DELIVERY_DELAY_MAX_MS}, a duplicate delivery with probability
 *   {@link SCHEDULE_DUPLICATE_RATE} and a missed one with {@link SCHEDULE_MISS_RATE}.
 */

/** Longest delivery delay after a rule's second, in a 60 s minute (scaled with shorter minutes). */
export const SCHEDULE_DELIVERY_DELAY_MAX_MS = 20_000;

/** Probability that one scheduled firing is delivered twice (our choice: AWS says "occasionally"). */
export const SCHEDULE_DUPLICATE_RATE = 0.01;

/** Probability that one scheduled firing is never delivered (our choice: AWS gives no rate). */
export const SCHEDULE_MISS_RATE = 0.01;

/**
 * {@link SCHEDULE_DELIVERY_DELAY_MAX_MS} for a schedule "minute" of `minuteMs` (the local runner
 * scales minutes down; delays scale with them).
 */
export function scheduleDeliveryDelayMaxMs(minuteMs: number): number {
  return Math.round((minuteMs * SCHEDULE_DELIVERY_DELAY_MAX_MS) / 60_000);
}
