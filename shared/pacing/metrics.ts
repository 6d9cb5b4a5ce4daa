/**
 * The pacer's CloudWatch metrics (Powertools EMF), flushed once per tick — never per campaign:
 * one record with dimensions {service, shard} (what the stack's per-shard alarms watch: the sum
 * of IsLeader over a shard's instances is its number of leaders; the maximum ParamsAgeMs is the
 * age of its parameters), one with {service} (tick overruns, alarmed function-wide) and one with
 * {service, shard, instance} (per-instance dashboards).
 */
import { type Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import { BEHIND_REASONS, behindTotal, type DeliveryCounts } from './delivery-counts.js';
import type { TickOutcome, TOP_CAMPAIGNS_REPORTED } from './pacer.js';

/** Metric names (the stack's alarms refer to these). */
export const pacerMetricNames = {
  isLeader: 'IsLeader',
  tickDuration: 'TickDurationMs',
  ticksSkipped: 'TicksSkipped',
  tickOverrun: 'TickOverruns',
  campaignsPaced: 'CampaignsPaced',
  publishLag: 'PublishLagMs',
  leaseChanges: 'LeaseChanges',
  fencedWritesRejected: 'FencedWritesRejected',
  paramsAge: 'ParamsAgeMs',
  invalidParams: 'ParamsInvalid',
  budgetRefreshFailures: 'BudgetRefreshFailures',
  controlStale: 'ControlParametersStale',
  /** Age of the oldest allocation authority entry a region follows, seconds (several regions). */
  allocationAuthorityAge: 'AllocationAuthorityAgeSeconds',
  /** Plans counted in a delivery band (delivery-counts.ts), once a minute per shard. */
  plansWatched: 'PlansWatched',
  /** Plans behind (< 90 % of expected), all reasons; per reason in {@link plansBehindByReason}. */
  plansBehind: 'PlansBehind',
  /** Plans behind, dimension `reason` (out-of-window, stale-parameters, account-cap, no-traffic, …). */
  plansBehindByReason: 'PlansBehindByReason',
  /** Plans ahead (> 110 % of expected). */
  plansAhead: 'PlansAhead',
} as const;

/**
 * Per-campaign spend and target E(t), dimensions {service, campaign}: what the regional
 * dashboard's "spend vs target, top campaigns" widget queries (Metrics Insights, top K by
 * spend). The publishing instance emits them every tick for the shard's
 * {@link TOP_CAMPAIGNS_REPORTED} largest campaign plans (bounded: never one series per campaign).
 */
export const spendTargetMetricNames = {
  spend: 'CampaignSpendMicros',
  target: 'CampaignTargetMicros',
} as const;

/** Records one tick's metrics and flushes them. */
export function recordTick(
  metrics: Metrics,
  outcome: TickOutcome,
  skippedBefore: number,
  tickMs: number,
): void {
  const shard = String(outcome.shard);
  const n = pacerMetricNames;
  metrics.addDimensions({ shard });
  metrics.addMetric(n.isLeader, MetricUnit.Count, outcome.isLeader ? 1 : 0);
  if (outcome.paramsAgeMs !== undefined)
    metrics.addMetric(n.paramsAge, MetricUnit.Milliseconds, outcome.paramsAgeMs);
  metrics.publishStoredMetrics();
  // Function-wide (dimension service only): the tick-overrun alarm watches all shards at once.
  metrics.addMetric(n.tickOverrun, MetricUnit.Count, outcome.durationMs > tickMs ? 1 : 0);
  const authorityAgeMs = outcome.sharing?.allocation?.authorityAgeMs;
  if (authorityAgeMs !== undefined)
    metrics.addMetric(n.allocationAuthorityAge, MetricUnit.Seconds, authorityAgeMs / 1000);
  metrics.publishStoredMetrics();
  metrics.addDimensions({ shard, instance: outcome.instanceId });
  metrics.addMetric(n.tickDuration, MetricUnit.Milliseconds, outcome.durationMs);
  metrics.addMetric(n.ticksSkipped, MetricUnit.Count, skippedBefore);
  metrics.addMetric(n.campaignsPaced, MetricUnit.Count, outcome.campaignsPaced);
  if (outcome.publishLagMs !== undefined)
    metrics.addMetric(n.publishLag, MetricUnit.Milliseconds, outcome.publishLagMs);
  const changed = outcome.lease.event === 'acquired' || outcome.lease.event === 'lost' ? 1 : 0;
  metrics.addMetric(n.leaseChanges, MetricUnit.Count, changed);
  metrics.addMetric(n.fencedWritesRejected, MetricUnit.Count, outcome.fencedWritesRejected);
  metrics.addMetric(n.invalidParams, MetricUnit.Count, outcome.invalidParams);
  metrics.addMetric(n.budgetRefreshFailures, MetricUnit.Count, outcome.budgets.ok ? 0 : 1);
  metrics.addMetric(n.controlStale, MetricUnit.Count, outcome.controlFresh ? 0 : 1);
  metrics.publishStoredMetrics();
  if (outcome.delivery) recordDelivery(metrics, outcome.delivery);
  for (const c of outcome.topCampaigns ?? []) {
    metrics.addDimensions({ campaign: c.campaignId });
    metrics.addMetric(spendTargetMetricNames.spend, MetricUnit.Count, c.spendMicros);
    metrics.addMetric(spendTargetMetricNames.target, MetricUnit.Count, c.targetMicros);
    metrics.publishStoredMetrics();
  }
}

/** Records ticks skipped after an invocation's last tick (no tick record to carry them). */
export function recordTrailingSkips(
  metrics: Metrics,
  shard: number,
  instanceId: string,
  skipped: number,
): void {
  if (skipped === 0) return;
  metrics.addDimensions({ shard: String(shard), instance: instanceId });
  metrics.addMetric(pacerMetricNames.ticksSkipped, MetricUnit.Count, skipped);
  metrics.publishStoredMetrics();
}

/**
 * The delivery bands, function-wide (dimension service: one datapoint per shard and minute, so a
 * minute's Sum is the deployment's region total), and the behind plans per reason.
 */
function recordDelivery(metrics: Metrics, d: DeliveryCounts): void {
  const n = pacerMetricNames;
  metrics.addMetric(n.plansWatched, MetricUnit.Count, d.watched);
  metrics.addMetric(n.plansBehind, MetricUnit.Count, behindTotal(d));
  metrics.addMetric(n.plansAhead, MetricUnit.Count, d.ahead);
  metrics.publishStoredMetrics();
  for (const reason of BEHIND_REASONS) {
    metrics.addDimensions({ reason });
    metrics.addMetric(n.plansBehindByReason, MetricUnit.Count, d.behind[reason]);
    metrics.publishStoredMetrics();
  }
}
