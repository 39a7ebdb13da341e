import { Duration, Stack } from "aws-cdk-lib";
import type { RestApi } from "aws-cdk-lib/aws-apigateway";
import {
  Alarm,
  AlarmStatusWidget,
  ComparisonOperator,
  Dashboard,
  GraphWidget,
  type IMetric,
  Metric,
  TreatMissingData,
} from "aws-cdk-lib/aws-cloudwatch";
import type { IFunction } from "aws-cdk-lib/aws-lambda";
import { FilterPattern, type ILogGroup, MetricFilter } from "aws-cdk-lib/aws-logs";
import type { IQueue } from "aws-cdk-lib/aws-sqs";
import type { IStateMachine } from "aws-cdk-lib/aws-stepfunctions";
import { Construct } from "constructs";

export interface ObservabilityProps {
  restApi: RestApi;
  accessLogs: ILogGroup;
}

const MINUTE = Duration.minutes(1);
const FIVE_MINUTES = Duration.minutes(5);

export interface WarehouseSignals {
  queue: IQueue;
  deadLetterQueue: IQueue;
  consumer: IFunction;
  /** Log groups of the functions that send records (their spool counters are log lines). */
  producerLogs: ILogGroup[];
}

/** Age of the oldest waiting record past which the warehouse counts as stuck (records are late). */
export const QUEUE_AGE_ALARM_SECONDS = 900;

/**
 * Alarms and one CloudWatch dashboard. Each part of the stack adds its own row (`addFunction`, and
 * later the queue, the warehouse and the deletion workflow). Alarms have no actions yet: subscribe a
 * topic to `alarms` to be notified.
 */
export class Observability extends Construct {
  readonly dashboard: Dashboard;
  readonly alarms: Alarm[] = [];

  constructor(scope: Construct, id: string, props: ObservabilityProps) {
    super(scope, id);
    const { restApi } = props;
    this.dashboard = new Dashboard(this, "Dashboard", { defaultInterval: Duration.hours(3) });

    // Average of 5XXError is the share of requests that failed on our side.
    const serverErrorRate = restApi.metricServerError({ statistic: "Average", period: MINUTE });
    this.alarm("ApiServerErrorRate", serverErrorRate, {
      description: "More than 5% of API requests answered 5xx in 3 of the last 5 minutes.",
      threshold: 0.05,
      evaluationPeriods: 5,
      datapointsToAlarm: 3,
    });

    // REST APIs have no throttle metric; the access log names the gateway's own THROTTLED responses
    // (a key's rate limit, answered by the service, is a different thing and not counted here).
    const throttled = new MetricFilter(this, "ApiThrottledFilter", {
      logGroup: props.accessLogs,
      filterPattern: FilterPattern.stringValue("$.responseType", "=", "THROTTLED"),
      metricNamespace: `dmt/${Stack.of(this).stackName}`,
      metricName: "ApiThrottled",
      metricValue: "1",
    }).metric({ statistic: "Sum", period: Duration.minutes(5) });
    this.alarm("ApiThrottles", throttled, {
      description: "API Gateway throttled requests at the stage limit in the last 5 minutes.",
      threshold: 1,
      evaluationPeriods: 1,
      datapointsToAlarm: 1,
    });

    this.dashboard.addWidgets(
      new GraphWidget({
        title: "API requests",
        left: [restApi.metricCount({ statistic: "Sum", period: MINUTE })],
        right: [
          restApi.metricClientError({ statistic: "Sum", period: MINUTE }),
          restApi.metricServerError({ statistic: "Sum", period: MINUTE }),
        ],
      }),
      new GraphWidget({
        title: "API latency (ms)",
        left: ["p50", "p99"].map((statistic) => restApi.metricLatency({ statistic, period: MINUTE })),
        right: ["p50", "p99"].map((statistic) =>
          restApi.metricIntegrationLatency({ statistic, period: MINUTE }),
        ),
      }),
      new GraphWidget({ title: "Gateway throttles", left: [throttled] }),
    );
  }

  /** A dashboard row for a function, and an alarm on its throttles (reserved concurrency exhausted). */
  addFunction(title: string, fn: IFunction): void {
    this.alarm(`${title}Throttles`, fn.metricThrottles({ statistic: "Sum", period: Duration.minutes(5) }), {
      description: `The ${title} function was throttled in the last 5 minutes.`,
      threshold: 1,
      evaluationPeriods: 1,
      datapointsToAlarm: 1,
    });
    this.dashboard.addWidgets(
      new GraphWidget({
        title: `${title}: invocations, errors, throttles`,
        left: [fn.metricInvocations({ statistic: "Sum", period: MINUTE })],
        right: [
          fn.metricErrors({ statistic: "Sum", period: MINUTE }),
          fn.metricThrottles({ statistic: "Sum", period: MINUTE }),
        ],
      }),
      new GraphWidget({
        title: `${title}: duration (ms)`,
        left: ["p50", "p99"].map((statistic) => fn.metricDuration({ statistic, period: MINUTE })),
      }),
    );
  }

  /**
   * The warehouse's alarms and row: anything in the dead-letter queue, a consumer invocation that
   * failed as a whole, records waiting too long, and records lost by a producer (neither queue nor
   * spool took them: the `queue.lost` log lines, counted by metric filters).
   */
  addWarehouse(signals: WarehouseSignals): void {
    const { queue, deadLetterQueue, consumer } = signals;
    const deadLetters = deadLetterQueue.metricApproximateNumberOfMessagesVisible({
      statistic: "Maximum",
      period: FIVE_MINUTES,
    });
    this.alarm("WarehouseDeadLetters", deadLetters, {
      description:
        "Records are in the warehouse's dead-letter queue (poison records, or records the consumer failed on 5 times); each message says why.",
      threshold: 1,
      evaluationPeriods: 1,
      datapointsToAlarm: 1,
    });
    const consumerErrors = consumer.metricErrors({ statistic: "Sum", period: FIVE_MINUTES });
    this.alarm("WarehouseConsumerErrors", consumerErrors, {
      description:
        "A warehouse consumer invocation failed as a whole in the last 5 minutes; its batch comes back.",
      threshold: 1,
      evaluationPeriods: 1,
      datapointsToAlarm: 1,
    });
    const oldest = queue.metricApproximateAgeOfOldestMessage({ statistic: "Maximum", period: FIVE_MINUTES });
    this.alarm("WarehouseQueueAge", oldest, {
      description: `The oldest record on the warehouse queue has waited more than ${QUEUE_AGE_ALARM_SECONDS / 60} minutes, for 15 minutes.`,
      threshold: QUEUE_AGE_ALARM_SECONDS,
      evaluationPeriods: 3,
      datapointsToAlarm: 3,
    });
    const namespace = `dmt/${Stack.of(this).stackName}`;
    const counter = (metricName: string, metric: string) => {
      signals.producerLogs.forEach((logGroup, i) => {
        new MetricFilter(this, `${metricName}Filter${i}`, {
          logGroup,
          filterPattern: FilterPattern.stringValue("$.metric", "=", metric),
          metricNamespace: namespace,
          metricName,
          metricValue: "$.count",
        });
      });
      return new Metric({ namespace, metricName, statistic: "Sum", period: FIVE_MINUTES });
    };
    const spooled = counter("RecordsSpooled", "queue.spooled");
    const lost = counter("RecordsLost", "queue.lost");
    this.alarm("WarehouseRecordsLost", lost, {
      description:
        "A proxy function could neither queue nor spool records in the last 5 minutes; their transaction ids are in its log.",
      threshold: 1,
      evaluationPeriods: 1,
      datapointsToAlarm: 1,
    });
    this.dashboard.addWidgets(
      new GraphWidget({
        title: "Warehouse queue: records in, waiting, oldest (s)",
        left: [
          queue.metricNumberOfMessagesSent({ statistic: "Sum", period: MINUTE }),
          queue.metricApproximateNumberOfMessagesVisible({ statistic: "Maximum", period: MINUTE }),
        ],
        right: [queue.metricApproximateAgeOfOldestMessage({ statistic: "Maximum", period: MINUTE })],
      }),
      new GraphWidget({
        title: "Warehouse: dead letters, spooled and lost records",
        left: [deadLetters, spooled, lost],
      }),
    );
  }

  /** The deletion workflow: its steps function's row, and an alarm on every failed deletion run. */
  addDeletion(steps: IFunction, stateMachine: IStateMachine): void {
    this.addFunction("DeletionSteps", steps);
    const failed = stateMachine.metricFailed({ statistic: "Sum", period: FIVE_MINUTES });
    this.alarm("DeletionFailed", failed, {
      description:
        "A deletion run failed in the last 5 minutes; GET /api/v1/data/{request_id} and the state machine's execution say why.",
      threshold: 1,
      evaluationPeriods: 1,
      datapointsToAlarm: 1,
    });
    this.dashboard.addWidgets(
      new GraphWidget({
        title: "Deletion runs: started, succeeded, failed",
        left: [
          stateMachine.metricStarted({ statistic: "Sum", period: FIVE_MINUTES }),
          stateMachine.metricSucceeded({ statistic: "Sum", period: FIVE_MINUTES }),
          failed,
        ],
      }),
    );
  }

  /** The alarm-status row; the stack adds it last, once every part has added its alarms. */
  addAlarmOverview(): void {
    this.dashboard.addWidgets(new AlarmStatusWidget({ title: "Alarms", alarms: this.alarms, width: 24 }));
  }

  private alarm(
    id: string,
    metric: IMetric,
    options: { description: string; threshold: number; evaluationPeriods: number; datapointsToAlarm: number },
  ): void {
    this.alarms.push(
      new Alarm(this, id, {
        metric,
        alarmDescription: options.description,
        threshold: options.threshold,
        evaluationPeriods: options.evaluationPeriods,
        datapointsToAlarm: options.datapointsToAlarm,
        comparisonOperator: ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treatMissingData: TreatMissingData.NOT_BREACHING,
      }),
    );
  }
}
