/**
 * The pacer's alarms as data (pure), from the pacer settings: the CDK stack creates exactly
 * these (cdk/constructs/pacer-alarms.ts). Metrics come from shared/pacing/metrics.ts, one record
 * per instance and tick with dimensions {service: pacer, shard}.
 *
 * - no leader: the shard's IsLeader sum over a minute is 0 for 2 minutes (each leader adds one
 *   per tick; missing data — no instance running — counts as no leader);
 * - several leaders: the sum exceeds the minute's ticks in 2 of 3 minutes (more than one
 *   instance believed it should publish in some tick; one late or overlapping invocation alone
 *   does not trip it);
 * - stale parameters: the newest publish of the shard is older than 3 ticks for 2 minutes
 *   (missing data breaches: nobody running means nobody publishing);
 * - tick overrun: ticks longer than the tick length, function-wide, 3 or more in 5 minutes;
 * - allocation authority age (several regions): the oldest allocation authority entry a region's
 *   pacer follows is older than half the allocation lease for 2 minutes — the plans' home region
 *   is unreachable; the regions stop at their lease (underspend, never overspend): rehome
 *   (`paceline budgets rehome`). Missing data (one region, no allocations) is fine;
 * - delivery, per band (delivery-counts.ts; docs/spend.md "Delivery metrics and alarms"): at
 *   least one paced plan below 90 % of its expected spend every minute for 30 minutes
 *   (`DeliveryBehind`), above 110 % every minute for 15 minutes (`DeliveryAhead`). A delivery
 *   alert about the buyers' plans — `PlansBehindByReason` and `paceline spend report` say which
 *   and why — not a fault of the pacer; an unfillable campaign keeps `DeliveryBehind` raised.
 */
import type { PacerSettings } from '../region/resources.js';
import { pacerMetricNames } from './metrics.js';
import { defaultAllocationSettings } from './regions/allocation-config.js';

/** One alarm, independent of CDK. */
export interface AlarmSpec {
  /** Stable id (construct id). */
  readonly id: string;
  readonly description: string;
  readonly metricName: string;
  readonly dimensions: Readonly<Record<string, string>>;
  readonly statistic: 'Sum' | 'Maximum';
  readonly periodSeconds: number;
  readonly comparison: 'LessThanThreshold' | 'GreaterThanThreshold' | 'GreaterThanOrEqualToThreshold';
  readonly threshold: number;
  readonly evaluationPeriods: number;
  readonly datapointsToAlarm: number;
  readonly treatMissingData: 'breaching' | 'notBreaching';
}

/** The pacer's alarms for a layout. */
export function pacerAlarmSpecs(settings: PacerSettings, service = 'pacer'): AlarmSpec[] {
  const ticksPerMinute = Math.round(60_000 / settings.tickMs);
  const out: AlarmSpec[] = [];
  for (let shard = 0; shard < settings.shards; shard++) {
    const dimensions = { service, shard: String(shard) };
    out.push(
      {
        id: `PacerNoLeader-${shard}`,
        description: `pacer shard ${shard}: no instance publishing (0 leaders) for 2 minutes — check leases, set the leader override`,
        metricName: pacerMetricNames.isLeader,
        dimensions,
        statistic: 'Sum',
        periodSeconds: 60,
        comparison: 'LessThanThreshold',
        threshold: 1,
        evaluationPeriods: 2,
        datapointsToAlarm: 2,
        treatMissingData: 'breaching',
      },
      {
        id: `PacerManyLeaders-${shard}`,
        description: `pacer shard ${shard}: more than one instance acting as leader — fencing keeps one publisher per tick; set the leader override`,
        metricName: pacerMetricNames.isLeader,
        dimensions,
        statistic: 'Sum',
        periodSeconds: 60,
        comparison: 'GreaterThanThreshold',
        threshold: ticksPerMinute,
        evaluationPeriods: 3,
        datapointsToAlarm: 2,
        treatMissingData: 'notBreaching',
      },
      {
        id: `PacerStaleParams-${shard}`,
        description: `pacer shard ${shard}: parameters older than 3 ticks — ad servers are on the fail-safe`,
        metricName: pacerMetricNames.paramsAge,
        dimensions,
        statistic: 'Maximum',
        periodSeconds: 60,
        comparison: 'GreaterThanThreshold',
        threshold: 3 * settings.tickMs,
        evaluationPeriods: 2,
        datapointsToAlarm: 2,
        treatMissingData: 'breaching',
      },
    );
  }
  out.push({
    id: 'PacerTickOverrun',
    description:
      'pacer: ticks took longer than the tick length (3+ in 5 minutes) — shard too large or a dependency slow',
    metricName: pacerMetricNames.tickOverrun,
    dimensions: { service },
    statistic: 'Sum',
    periodSeconds: 300,
    comparison: 'GreaterThanOrEqualToThreshold',
    threshold: 3,
    evaluationPeriods: 1,
    datapointsToAlarm: 1,
    treatMissingData: 'notBreaching',
  });
  out.push({
    id: 'AllocationAuthorityAge',
    description:
      'allocations: a region follows an allocation authority older than half its lease for 2 minutes — the home region is unreachable; regions stop at their lease: rehome the plans (paceline budgets rehome)',
    metricName: pacerMetricNames.allocationAuthorityAge,
    dimensions: { service },
    statistic: 'Maximum',
    periodSeconds: 60,
    comparison: 'GreaterThanThreshold',
    threshold: defaultAllocationSettings.ackLeaseMs / 2 / 1000,
    evaluationPeriods: 2,
    datapointsToAlarm: 2,
    treatMissingData: 'notBreaching',
  });
  out.push(
    {
      id: 'DeliveryBehind',
      description:
        'delivery: paced plans below 90 % of their expected spend every minute for 30 minutes — PlansBehindByReason says why (lost-auctions, no-traffic, account-cap, …); paceline spend report names them',
      metricName: pacerMetricNames.plansBehind,
      dimensions: { service },
      statistic: 'Sum',
      periodSeconds: 60,
      comparison: 'GreaterThanOrEqualToThreshold',
      threshold: 1,
      evaluationPeriods: 30,
      datapointsToAlarm: 30,
      treatMissingData: 'notBreaching',
    },
    {
      id: 'DeliveryAhead',
      description:
        'delivery: paced plans above 110 % of their expected spend every minute for 15 minutes — the guards hold spend to E(t); check budget cuts below spend and the guards (paceline spend report)',
      metricName: pacerMetricNames.plansAhead,
      dimensions: { service },
      statistic: 'Sum',
      periodSeconds: 60,
      comparison: 'GreaterThanOrEqualToThreshold',
      threshold: 1,
      evaluationPeriods: 15,
      datapointsToAlarm: 15,
      treatMissingData: 'notBreaching',
    },
  );
  return out;
}

/**
 * Whether `spec` goes into alarm on `datapoints` (one value per period, oldest first; undefined:
 * missing), as CloudWatch evaluates it: some run of `evaluationPeriods` consecutive periods holds
 * at least `datapointsToAlarm` breaching ones (missing data per `treatMissingData`). What the
 * simulator uses to say which alarms a scenario raises.
 */
export function alarmFires(spec: AlarmSpec, datapoints: readonly (number | undefined)[]): boolean {
  const breaches = datapoints.map((v) => {
    if (v === undefined) return spec.treatMissingData === 'breaching';
    if (spec.comparison === 'LessThanThreshold') return v < spec.threshold;
    if (spec.comparison === 'GreaterThanThreshold') return v > spec.threshold;
    return v >= spec.threshold;
  });
  let inWindow = 0;
  for (let i = 0; i < breaches.length; i++) {
    if (breaches[i]) inWindow++;
    if (i >= spec.evaluationPeriods && breaches[i - spec.evaluationPeriods]) inWindow--;
    if (i >= spec.evaluationPeriods - 1 && inWindow >= spec.datapointsToAlarm) return true;
  }
  return false;
}
