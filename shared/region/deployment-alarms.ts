/**
 * Who every region's alarm topic notifies (`paceline:alarms`): SNS subscriptions by kind, each
 * endpoint checked against what that kind takes.
 */
import { InvalidDeploymentSettingsError, isObject, only } from './deployment-input.js';

/** Kinds of alarm subscription (SNS protocols). */
export const ALARM_SUBSCRIPTION_KINDS = ['email', 'sms', 'https', 'sqs', 'lambda'] as const;
/** One of {@link ALARM_SUBSCRIPTION_KINDS}. */
export type AlarmSubscriptionKind = (typeof ALARM_SUBSCRIPTION_KINDS)[number];

/** Who the alarm topic notifies: an address, phone number, URL, queue or function. */
export interface AlarmSubscription {
  readonly kind: AlarmSubscriptionKind;
  /** An email address, an E.164 phone number, an https URL, an SQS queue ARN or a Lambda function ARN. */
  readonly endpoint: string;
}

/** Parses `paceline:alarms` (none when absent). */
export function parseAlarms(key: string, raw: unknown): AlarmSubscription[] {
  if (raw === undefined) return [];
  if (!isObject(raw))
    throw new InvalidDeploymentSettingsError(
      key,
      'give { "subscriptions": [{ "kind": "email", "endpoint": "ops@example.com" }] }.',
    );
  only(key, raw, ['subscriptions']);
  const list = raw.subscriptions ?? [];
  if (!Array.isArray(list))
    throw new InvalidDeploymentSettingsError(
      `${key}.subscriptions`,
      'give a list of { "kind", "endpoint" }.',
    );
  return list.map((entry: unknown, i) => {
    const at = `${key}.subscriptions[${i}]`;
    if (!isObject(entry)) throw new InvalidDeploymentSettingsError(at, 'give { "kind": …, "endpoint": … }.');
    only(at, entry, ['kind', 'endpoint']);
    const kind = entry.kind;
    if (!ALARM_SUBSCRIPTION_KINDS.includes(kind as AlarmSubscriptionKind))
      throw new InvalidDeploymentSettingsError(
        `${at}.kind`,
        `${JSON.stringify(kind)}: give one of ${ALARM_SUBSCRIPTION_KINDS.join(', ')}.`,
      );
    const endpoint = entry.endpoint;
    const rule = subscriptionEndpoint[kind as AlarmSubscriptionKind];
    if (typeof endpoint !== 'string' || !rule.pattern.test(endpoint))
      throw new InvalidDeploymentSettingsError(
        `${at}.endpoint`,
        `${JSON.stringify(endpoint)}: give ${rule.what}.`,
      );
    return { kind: kind as AlarmSubscriptionKind, endpoint };
  });
}

/** What each kind of subscription's endpoint must look like. */
const subscriptionEndpoint: Record<AlarmSubscriptionKind, { pattern: RegExp; what: string }> = {
  email: { pattern: /^[^@\s]+@[^@\s]+\.[^@\s]+$/, what: 'an email address' },
  sms: { pattern: /^\+[1-9]\d{6,14}$/, what: 'a phone number in E.164 form, e.g. +14155550100' },
  https: { pattern: /^https:\/\/[^\s/]+(\/\S*)?$/, what: 'an https:// URL' },
  sqs: {
    pattern: /^arn:aws[a-z-]*:sqs:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,80}$/,
    what: 'an SQS queue ARN (arn:aws:sqs:<region>:<account>:<name>; FIFO queues cannot subscribe to this topic)',
  },
  lambda: {
    pattern: /^arn:aws[a-z-]*:lambda:[a-z0-9-]+:\d{12}:function:[A-Za-z0-9_-]{1,64}(:[A-Za-z0-9$_-]+)?$/,
    what: 'a Lambda function ARN (arn:aws:lambda:<region>:<account>:function:<name>)',
  },
};
