import { Duration } from "aws-cdk-lib";
import { Alarm, ComparisonOperator, TreatMissingData } from "aws-cdk-lib/aws-cloudwatch";
import { Rule, Schedule } from "aws-cdk-lib/aws-events";
import { LambdaFunction } from "aws-cdk-lib/aws-events-targets";
import type { Function as LambdaFn } from "aws-cdk-lib/aws-lambda";
import type { Construct } from "constructs";
import type { Observability } from "./observability";

/**
 * Runs `fn` once a day at `hour:minute` UTC (an EventBridge rule, `Schedule`, one retry: a failed run
 * is finished by the next) and raises an alarm (`Failing`) on a day with a failed invocation.
 */
export function runDaily(
  scope: Construct,
  fn: LambdaFn,
  props: {
    hour: string;
    minute: string;
    description: string;
    whenFailing: string;
    observability: Observability;
  },
): void {
  new Rule(scope, "Schedule", {
    description: props.description,
    schedule: Schedule.cron({ hour: props.hour, minute: props.minute }),
    targets: [new LambdaFunction(fn, { retryAttempts: 1 })],
  });
  props.observability.alarms.push(
    new Alarm(scope, "Failing", {
      metric: fn.metricErrors({ statistic: "Sum", period: Duration.days(1) }),
      alarmDescription: props.whenFailing,
      threshold: 1,
      evaluationPeriods: 1,
      comparisonOperator: ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      treatMissingData: TreatMissingData.NOT_BREACHING,
    }),
  );
}
