import { Duration } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import { Construct } from 'constructs';
import { BEHIND_REASONS } from '../../shared/pacing/delivery-counts.js';
import { pacerMetricNames, spendTargetMetricNames } from '../../shared/pacing/metrics.js';

/** Props of {@link RegionDashboard}. */
export interface RegionDashboardProps {
  /** Dashboard name (one per region). */
  readonly dashboardName: string;
  /** The pacer's function name (the `service` dimension of its metrics). */
  readonly pacerService: string;
  /** Pacer shards N. */
  readonly shards: number;
  /** Stream-triggered functions: name → their Lambda function and on-failure queue. */
  readonly streamFunctions: readonly {
    readonly name: string;
    readonly iteratorAge: cloudwatch.IMetric;
    readonly onFailureDepth: cloudwatch.IMetric;
  }[];
  /** How many campaigns the spend-vs-target widget shows (by spend). @default 10 */
  readonly topCampaigns?: number;
  /** Metric namespace. @default 'Paceline' */
  readonly namespace?: string;
}

/**
 * One CloudWatch dashboard per region: leaders per shard, tick duration, parameter age, the
 * streams' iterator age, dead letters (quarantined records and on-failure batches), spend vs
 * target for the top campaigns and the delivery bands (plans behind per reason, ahead) — the
 * figures the runbook (docs/runbook.md) sends operators to.
 */
export class RegionDashboard extends Construct {
  readonly dashboard: cloudwatch.Dashboard;

  constructor(scope: Construct, id: string, props: RegionDashboardProps) {
    super(scope, id);
    const namespace = props.namespace ?? 'Paceline';
    const minute = Duration.minutes(1);
    const perShard = (metricName: string, statistic: string) =>
      Array.from(
        { length: props.shards },
        (_, shard) =>
          new cloudwatch.Metric({
            namespace,
            metricName,
            dimensionsMap: { service: props.pacerService, shard: String(shard) },
            statistic,
            period: minute,
            label: `shard ${shard}`,
          }),
      );
    // A Metrics Insights query covers every instance without listing them (N × instances series).
    const insights = (expression: string, label: string) =>
      new cloudwatch.MathExpression({ expression, label, period: minute, usingMetrics: {} });
    const top = props.topCampaigns ?? 10;
    this.dashboard = new cloudwatch.Dashboard(this, 'Dashboard', {
      dashboardName: props.dashboardName,
      defaultInterval: Duration.hours(3),
    });
    this.dashboard.addWidgets(
      new cloudwatch.GraphWidget({
        title: 'Leaders per shard (IsLeader sum per minute; ticks per minute = exactly one leader)',
        left: perShard(pacerMetricNames.isLeader, 'Sum'),
        width: 12,
        legendPosition: cloudwatch.LegendPosition.RIGHT,
      }),
      new cloudwatch.GraphWidget({
        title: 'Tick duration (ms, max per shard and instance)',
        left: [
          insights(
            `SELECT MAX(${pacerMetricNames.tickDuration}) FROM SCHEMA("${namespace}", instance,service,shard) WHERE service = '${props.pacerService}' GROUP BY shard ORDER BY MAX() DESC LIMIT 50`,
            'tick ms',
          ),
        ],
        width: 12,
      }),
    );
    this.dashboard.addWidgets(
      new cloudwatch.GraphWidget({
        title: 'Parameter age per shard (ms; alarm above 3 ticks)',
        left: perShard(pacerMetricNames.paramsAge, 'Maximum'),
        width: 12,
        legendPosition: cloudwatch.LegendPosition.RIGHT,
      }),
      new cloudwatch.GraphWidget({
        title: 'Stream iterator age (ms, max)',
        left: props.streamFunctions.map((f) => f.iteratorAge),
        width: 12,
      }),
    );
    this.dashboard.addWidgets(
      new cloudwatch.GraphWidget({
        title: 'Dead letters: quarantined records (sum) and on-failure batches (visible)',
        left: props.streamFunctions.map(
          (f) =>
            new cloudwatch.Metric({
              namespace,
              metricName: 'RecordsQuarantined',
              dimensionsMap: { service: f.name },
              statistic: 'Sum',
              period: Duration.minutes(5),
              label: `${f.name} quarantined`,
            }),
        ),
        right: props.streamFunctions.map((f) => f.onFailureDepth),
        width: 12,
      }),
      new cloudwatch.GraphWidget({
        title: `Spend vs target, top ${top} campaigns by spend (micros)`,
        left: [
          insights(
            `SELECT MAX(${spendTargetMetricNames.spend}) FROM SCHEMA("${namespace}", campaign,service) WHERE service = '${props.pacerService}' GROUP BY campaign ORDER BY MAX() DESC LIMIT ${top}`,
            'spend',
          ),
          insights(
            `SELECT MAX(${spendTargetMetricNames.target}) FROM SCHEMA("${namespace}", campaign,service) WHERE service = '${props.pacerService}' GROUP BY campaign ORDER BY MAX() DESC LIMIT ${top}`,
            'target E(t)',
          ),
        ],
        width: 12,
      }),
    );
    const band = (metricName: string, label: string, dimensionsMap: Record<string, string> = {}) =>
      new cloudwatch.Metric({
        namespace,
        metricName,
        dimensionsMap: { service: props.pacerService, ...dimensionsMap },
        statistic: 'Sum',
        period: minute,
        label,
      });
    this.dashboard.addWidgets(
      new cloudwatch.GraphWidget({
        title: 'Delivery: plans watched, ahead (> 110 %) and behind (< 90 %) of expected spend',
        left: [
          band(pacerMetricNames.plansWatched, 'watched'),
          band(pacerMetricNames.plansAhead, 'ahead'),
          band(pacerMetricNames.plansBehind, 'behind'),
        ],
        width: 12,
      }),
      new cloudwatch.GraphWidget({
        title: 'Delivery: plans behind per reason (paceline spend report names them)',
        left: BEHIND_REASONS.map((reason) => band(pacerMetricNames.plansBehindByReason, reason, { reason })),
        stacked: true,
        width: 12,
      }),
    );
  }
}
