import { Duration, Validations } from "aws-cdk-lib";
import { Alarm, ComparisonOperator, TreatMissingData } from "aws-cdk-lib/aws-cloudwatch";
import { EventBus, Rule } from "aws-cdk-lib/aws-events";
import { SqsQueue } from "aws-cdk-lib/aws-events-targets";
import { PolicyStatement } from "aws-cdk-lib/aws-iam";
import type { IKey } from "aws-cdk-lib/aws-kms";
import type { Function as LambdaFunction } from "aws-cdk-lib/aws-lambda";
import { SqsEventSource } from "aws-cdk-lib/aws-lambda-event-sources";
import { Queue, QueueEncryption } from "aws-cdk-lib/aws-sqs";
import { Construct } from "constructs";
import { BUS_SOURCE } from "../lambda/adapters/eventbridge/bus";
import { WEBHOOK_SECRET_CONTEXT } from "../lambda/events/webhooks";
import { DmtFunction, type LambdaDefaults } from "./lambda-defaults";
import type { Store } from "./store";

export interface EventsProps {
  defaults: LambdaDefaults;
  store: Store;
  /** The key that wraps webhook secrets (the BYOK key: the same envelope scheme). */
  secretsKey: IKey;
}

/** How long EventBridge retries putting an event on the delivery queue before its dead-letter queue. */
const RULE_RETRIES = { attempts: 20, maxEventAge: Duration.hours(2) };

/** The delivery function's limits: a POST waits 10 s at most; a batch of 10 runs side by side. */
const DELIVERY = { timeout: Duration.seconds(60), batchSize: 10, maxReceiveCount: 5 };

/**
 * Events: the stack's EventBridge bus, where every event goes as a CloudEvent (`source` "dmt",
 * `detail-type` the event type), for users to route with rules of their own; a rule of the stack
 * that feeds the webhook delivery queue; the delivery function, which posts signed webhooks and
 * re-queues retries with a delay; a dead-letter queue for messages the function itself cannot
 * process, and an alarm on it. (A webhook that fails for good is kept in the delivery log, not here.)
 */
export class Events extends Construct {
  readonly bus: EventBus;
  readonly queue: Queue;
  readonly deadLetterQueue: Queue;
  /** Events the rule could not put on the delivery queue (after its retries). */
  readonly ruleDeadLetterQueue: Queue;
  readonly rule: Rule;
  readonly delivery: DmtFunction;
  readonly deadLetterAlarm: Alarm;

  constructor(scope: Construct, id: string, props: EventsProps) {
    super(scope, id);
    this.bus = new EventBus(this, "Bus", { description: "dmt events (CloudEvents 1.0 in detail)" });
    this.deadLetterQueue = new Queue(this, "DeadLetterQueue", {
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: Duration.days(14),
    });
    this.queue = new Queue(this, "DeliveryQueue", {
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: Duration.days(4),
      // Six times the function's timeout, as Lambda's SQS event source advises.
      visibilityTimeout: Duration.seconds(DELIVERY.timeout.toSeconds() * 6),
      deadLetterQueue: { queue: this.deadLetterQueue, maxReceiveCount: DELIVERY.maxReceiveCount },
    });
    this.ruleDeadLetterQueue = new Queue(this, "RuleDeadLetterQueue", {
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: Duration.days(14),
    });
    Validations.of(this.ruleDeadLetterQueue).acknowledge({
      id: "AwsSolutions-SQS3",
      reason:
        "This queue is the dead-letter queue of the webhook rule's target (an EventBridge setting, which cdk-nag does not see); nothing consumes it but the operator.",
    });
    this.rule = new Rule(this, "ToWebhooks", {
      eventBus: this.bus,
      description: "every dmt event to the webhook delivery queue",
      eventPattern: { source: [BUS_SOURCE] },
      targets: [
        new SqsQueue(this.queue, {
          deadLetterQueue: this.ruleDeadLetterQueue,
          retryAttempts: RULE_RETRIES.attempts,
          maxEventAge: RULE_RETRIES.maxEventAge,
        }),
      ],
    });

    this.delivery = new DmtFunction(this, "Delivery", {
      handler: "events",
      description: "dmt: webhook delivery (signed per Standard Webhooks)",
      defaults: props.defaults,
      timeout: DELIVERY.timeout,
      environment: {
        DMT_BYOK_KEY_ARN: props.secretsKey.keyArn,
        DMT_WEBHOOK_QUEUE_URL: this.queue.queueUrl,
        DMT_EVENT_BUS_NAME: this.bus.eventBusName,
      },
    });
    const fn = this.delivery.function;
    fn.addEventSource(
      new SqsEventSource(this.queue, { batchSize: DELIVERY.batchSize, reportBatchItemFailures: true }),
    );
    props.store.grant(fn, "webhooks", ["Query", "GetItem"]);
    props.store.grant(fn, "webhookDeliveries", ["GetItem", "PutItem"]);
    // Webhook secrets only (their encryption context), never a customer's vendor key under the same key.
    fn.addToRolePolicy(
      new PolicyStatement({
        actions: ["kms:Decrypt"],
        resources: [props.secretsKey.keyArn],
        conditions: { StringLike: { "kms:EncryptionContext:dmt:context": `${WEBHOOK_SECRET_CONTEXT}*` } },
      }),
    );
    this.queue.grantSendMessages(fn);

    this.deadLetterAlarm = new Alarm(this, "DeadLettersAlarm", {
      metric: this.deadLetterQueue.metricApproximateNumberOfMessagesVisible({
        statistic: "Maximum",
        period: Duration.minutes(5),
      }),
      alarmDescription:
        "Event delivery messages the delivery function could not process reached its dead-letter queue.",
      threshold: 1,
      evaluationPeriods: 1,
      datapointsToAlarm: 1,
      comparisonOperator: ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      treatMissingData: TreatMissingData.NOT_BREACHING,
    });
  }
  /** The dashboard API's webhook tests and resends: their retries go to the delivery queue. */
  connectWebhookAdmin(fn: LambdaFunction): void {
    fn.addEnvironment("DMT_WEBHOOK_QUEUE_URL", this.queue.queueUrl);
    this.queue.grantSendMessages(fn);
  }

  /** A function that emits events: the bus's name, and leave to put events on it (on it only). */
  connectPublisher(fn: LambdaFunction): void {
    fn.addEnvironment("DMT_EVENT_BUS_NAME", this.bus.eventBusName);
    this.bus.grantPutEventsTo(fn);
  }
}
