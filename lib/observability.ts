import { Duration, Stack } from "aws-cdk-lib";
import type { RestApi } from "aws-cdk-lib/aws-apigateway";
import {
  Alarm,
  AlarmStatusWidget,
  ComparisonOperator,
  Dashboard,
  GraphWidget,
  type IMetric,
  MathExpression,
  Metric,
  TreatMissingData,
} from "aws-cdk-lib/aws-cloudwatch";
import { SnsAction } from "aws-cdk-lib/aws-cloudwatch-actions";
import type { ITable } from "aws-cdk-lib/aws-dynamodb";
import type { IEventBus, IRule } from "aws-cdk-lib/aws-events";
import type { IFunction } from "aws-cdk-lib/aws-lambda";
import { FilterPattern, type ILogGroup, MetricFilter } from "aws-cdk-lib/aws-logs";
import type { CfnPipe } from "aws-cdk-lib/aws-pipes";
import { Topic } from "aws-cdk-lib/aws-sns";
import { EmailSubscription } from "aws-cdk-lib/aws-sns-subscriptions";
import type { IQueue } from "aws-cdk-lib/aws-sqs";
import type { IStateMachine } from "aws-cdk-lib/aws-stepfunctions";
import { Construct } from "constructs";

export interface ObservabilityProps {
  restApi: RestApi;
  accessLogs: ILogGroup;
  /** Subscribed by email to the alarm topic (a confirmation mail arrives first); none: subscribe later. */
  alarmEmail?: string;
  /**
   * The account's concurrent-execution quota of Lambda in the region (default 1000, the AWS default);
   * the alarm fires at 80% of it.
   */
  accountConcurrency?: number;
}

/** A loose check: something@somewhere.tld, no spaces (SNS sends a confirmation mail to the address). */
export const EMAIL_PATTERN = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

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
 * Alarms, one SNS topic they all notify (going off and clearing), and one CloudWatch dashboard. Each
 * part of the stack adds its own row and alarms (`addFunction`, `addWarehouse`...), or pushes its
 * alarms onto `alarms`; `completeAlarms` connects them all to the topic once every part has added its own.
 */
export class Observability extends Construct {
  readonly dashboard: Dashboard;
  readonly alarms: Alarm[] = [];
  readonly topic: Topic;

  constructor(scope: Construct, id: string, props: ObservabilityProps) {
    super(scope, id);
    const { restApi } = props;
    this.dashboard = new Dashboard(this, "Dashboard", { defaultInterval: Duration.hours(3) });
    // No KMS key: CloudWatch cannot publish to a topic under the AWS-managed SNS key, and a notification
    // holds an alarm's name, state and threshold only.
    this.topic = new Topic(this, "AlarmTopic", {
      displayName: `${Stack.of(this).stackName} alarms`,
      enforceSSL: true,
    });
    if (props.alarmEmail !== undefined) {
      if (!EMAIL_PATTERN.test(props.alarmEmail)) {
        throw new Error(`Alarm email ${JSON.stringify(props.alarmEmail)} is not an email address.`);
      }
      this.topic.addSubscription(new EmailSubscription(props.alarmEmail));
    }

    // The account's pool: every function of every stack in the region draws from it.
    const quota = props.accountConcurrency ?? 1000;
    this.alarm(
      "AccountConcurrency",
      new Metric({
        namespace: "AWS/Lambda",
        metricName: "ConcurrentExecutions",
        statistic: "Maximum",
        period: MINUTE,
      }),
      {
        description: `Lambda ran more than 80% of the account's ${quota} concurrent executions in this region for 3 minutes; beyond it, calls are throttled. Ask AWS for a higher quota.`,
        threshold: Math.floor(quota * 0.8),
        evaluationPeriods: 3,
        datapointsToAlarm: 3,
      },
    );

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

  /**
   * A proxy function's alarms beyond its throttles: invocations that failed (a crash, not an error
   * answer), and a p99 duration near the timeout (calls cut off, or vendors hanging).
   */
  addProxy(title: string, fn: IFunction, timeout: Duration): void {
    this.alarm(`${title}Errors`, fn.metricErrors({ statistic: "Sum", period: FIVE_MINUTES }), {
      description: `The ${title} function failed (not an error answer: the invocation itself) in the last 5 minutes.`,
      threshold: 1,
      evaluationPeriods: 1,
      datapointsToAlarm: 1,
    });
    const limit = timeout.toMilliseconds();
    this.alarm(`${title}DurationP99`, fn.metricDuration({ statistic: "p99", period: FIVE_MINUTES }), {
      description: `The ${title} function's p99 duration was over 80% of its ${timeout.toMinutes()}-minute timeout for 15 minutes: calls near being cut off.`,
      threshold: Math.floor(limit * 0.8),
      evaluationPeriods: 3,
      datapointsToAlarm: 3,
    });
  }

  /** Throttled reads or writes on a table (on demand: a hot partition, or the account's table quota). */
  addTableThrottles(title: string, table: ITable): void {
    const metric = (metricName: string) =>
      new Metric({
        namespace: "AWS/DynamoDB",
        metricName,
        dimensionsMap: { TableName: table.tableName },
        statistic: "Sum",
        period: FIVE_MINUTES,
      });
    const throttled = new MathExpression({
      expression: "FILL(reads, 0) + FILL(writes, 0)",
      usingMetrics: { reads: metric("ReadThrottleEvents"), writes: metric("WriteThrottleEvents") },
      label: `${title} throttle events`,
      period: FIVE_MINUTES,
    });
    this.alarm(`${title}TableThrottles`, throttled, {
      description: `DynamoDB throttled requests on the ${title} table in the last 5 minutes: calls waited or failed.`,
      threshold: 1,
      evaluationPeriods: 1,
      datapointsToAlarm: 1,
    });
  }

  /** An EventBridge pipe: executions that failed, and records in its dead-letter queue. */
  addPipe(title: string, pipe: CfnPipe, deadLetterQueue: IQueue): void {
    const failed = new Metric({
      namespace: "AWS/EventBridge/Pipes",
      metricName: "ExecutionFailed",
      dimensionsMap: { PipeName: pipe.ref },
      statistic: "Sum",
      period: FIVE_MINUTES,
    });
    this.alarm(`${title}PipeFailed`, failed, {
      description: `The ${title} pipe failed to deliver in the last 5 minutes; its log group says why.`,
      threshold: 1,
      evaluationPeriods: 1,
      datapointsToAlarm: 1,
    });
    this.deadLetterAlarm(`${title}PipeDeadLetters`, deadLetterQueue, `records the ${title} pipe gave up on`);
  }

  /** An EventBridge rule on a bus of the stack: invocations that failed for good, and its dead letters. */
  addRule(title: string, rule: IRule, bus: IEventBus, deadLetterQueue: IQueue): void {
    const failed = new Metric({
      namespace: "AWS/Events",
      metricName: "FailedInvocations",
      // A rule on a custom bus is measured by both names.
      dimensionsMap: { EventBusName: bus.eventBusName, RuleName: rule.ruleName },
      statistic: "Sum",
      period: FIVE_MINUTES,
    });
    this.alarm(`${title}RuleFailed`, failed, {
      description: `The ${title} rule failed to deliver events in the last 5 minutes.`,
      threshold: 1,
      evaluationPeriods: 1,
      datapointsToAlarm: 1,
    });
    this.deadLetterAlarm(
      `${title}RuleDeadLetters`,
      deadLetterQueue,
      `events the ${title} rule could not deliver`,
    );
  }

  /**
   * The alarm-status row, and every alarm connected to the topic; the stack calls it last, once every
   * part has added its alarms.
   */
  completeAlarms(): void {
    this.dashboard.addWidgets(new AlarmStatusWidget({ title: "Alarms", alarms: this.alarms, width: 24 }));
    const action = new SnsAction(this.topic);
    for (const alarm of this.alarms) {
      alarm.addAlarmAction(action);
      alarm.addOkAction(action);
    }
  }

  private deadLetterAlarm(id: string, queue: IQueue, what: string): void {
    const visible = queue.metricApproximateNumberOfMessagesVisible({
      statistic: "Maximum",
      period: FIVE_MINUTES,
    });
    this.alarm(id, visible, {
      description: `The dead-letter queue holds ${what}; each message says what it was.`,
      threshold: 1,
      evaluationPeriods: 1,
      datapointsToAlarm: 1,
    });
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
