import { Duration } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as actions from 'aws-cdk-lib/aws-cloudwatch-actions';
import type * as sns from 'aws-cdk-lib/aws-sns';
import { Construct } from 'constructs';
import type { AlarmSpec } from '../../shared/pacing/alarms.js';

/** Props of {@link PacerAlarms}. */
export interface PacerAlarmsProps {
  /** The alarms to create (shared/pacing/alarms.ts derives them from the pacer settings). */
  readonly specs: readonly AlarmSpec[];
  /** Where alarms notify. */
  readonly alarmTopic: sns.ITopic;
  /** Metric namespace. @default 'Paceline' */
  readonly namespace?: string;
}

/** CloudWatch alarms of the pacer, one per spec, notifying the alarm topic. */
export class PacerAlarms extends Construct {
  readonly alarms: cloudwatch.Alarm[] = [];

  constructor(scope: Construct, id: string, props: PacerAlarmsProps) {
    super(scope, id);
    for (const spec of props.specs) {
      const alarm = new cloudwatch.Alarm(this, spec.id, {
        alarmDescription: spec.description,
        metric: new cloudwatch.Metric({
          namespace: props.namespace ?? 'Paceline',
          metricName: spec.metricName,
          dimensionsMap: { ...spec.dimensions },
          statistic: spec.statistic,
          period: Duration.seconds(spec.periodSeconds),
        }),
        threshold: spec.threshold,
        comparisonOperator:
          cloudwatch.ComparisonOperator[
            (
              {
                LessThanThreshold: 'LESS_THAN_THRESHOLD',
                GreaterThanThreshold: 'GREATER_THAN_THRESHOLD',
                GreaterThanOrEqualToThreshold: 'GREATER_THAN_OR_EQUAL_TO_THRESHOLD',
              } as const
            )[spec.comparison]
          ],
        evaluationPeriods: spec.evaluationPeriods,
        datapointsToAlarm: spec.datapointsToAlarm,
        treatMissingData:
          spec.treatMissingData === 'breaching'
            ? cloudwatch.TreatMissingData.BREACHING
            : cloudwatch.TreatMissingData.NOT_BREACHING,
      });
      alarm.addAlarmAction(new actions.SnsAction(props.alarmTopic));
      this.alarms.push(alarm);
    }
  }
}
