import { Duration } from "aws-cdk-lib";
import { Alarm, ComparisonOperator, TreatMissingData } from "aws-cdk-lib/aws-cloudwatch";
import { Rule, Schedule } from "aws-cdk-lib/aws-events";
import { LambdaFunction } from "aws-cdk-lib/aws-events-targets";
import type { Function as LambdaFn } from "aws-cdk-lib/aws-lambda";
import { SqsEventSource } from "aws-cdk-lib/aws-lambda-event-sources";
import { Queue, QueueEncryption } from "aws-cdk-lib/aws-sqs";
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

/** Units of work at once: each is one invocation of the function. */
const WORKERS = 5;
/** Tries of a unit before its message goes to the dead-letter queue (left undone, alarmed). */
const TRIES = 3;

/**
 * The queue a daily run fans its work out over (`lambda/handlers/runtime/planned-work.ts`): the
 * function plans into it (its URL in `urlVariable`) and takes it, one unit an invocation and 5 at
 * once. A unit that fails 3 times goes to a dead-letter queue: the units left undone, which an alarm
 * watches (`undone`), as another watches a unit that waited a day (`waiting`). The ids name the
 * resources in `scope`, as each run's own.
 */
export function fanOut(
  scope: Construct,
  fn: LambdaFn,
  props: {
    queueId: string;
    urlVariable: string;
    undone: { id: string; description: string };
    waiting: { id: string; description: string };
    observability: Observability;
  },
): { queue: Queue; deadLetterQueue: Queue; undoneAlarm: Alarm } {
  const deadLetterQueue = new Queue(scope, "UndoneQueue", {
    encryption: QueueEncryption.SQS_MANAGED,
    enforceSSL: true,
    retentionPeriod: Duration.days(14),
  });
  const queue = new Queue(scope, props.queueId, {
    encryption: QueueEncryption.SQS_MANAGED,
    enforceSSL: true,
    retentionPeriod: Duration.days(4),
    // Six times the function's timeout, as Lambda's SQS event source advises.
    visibilityTimeout: fn.timeout ? Duration.seconds(fn.timeout.toSeconds() * 6) : Duration.minutes(90),
    deadLetterQueue: { queue: deadLetterQueue, maxReceiveCount: TRIES },
  });
  fn.addEnvironment(props.urlVariable, queue.queueUrl);
  queue.grantSendMessages(fn);
  fn.addEventSource(
    new SqsEventSource(queue, { batchSize: 1, maxConcurrency: WORKERS, reportBatchItemFailures: true }),
  );
  const alarm = (id: string, description: string, metric: Alarm["metric"], threshold: number) =>
    new Alarm(scope, id, {
      metric,
      alarmDescription: description,
      threshold,
      evaluationPeriods: 1,
      comparisonOperator: ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      treatMissingData: TreatMissingData.NOT_BREACHING,
    });
  const every15Minutes = { statistic: "Maximum", period: Duration.minutes(15) };
  const undoneAlarm = alarm(
    props.undone.id,
    props.undone.description,
    deadLetterQueue.metricApproximateNumberOfMessagesVisible(every15Minutes),
    1,
  );
  props.observability.alarms.push(
    undoneAlarm,
    alarm(
      props.waiting.id,
      props.waiting.description,
      queue.metricApproximateAgeOfOldestMessage(every15Minutes),
      Duration.days(1).toSeconds(),
    ),
  );
  return { queue, deadLetterQueue, undoneAlarm };
}
