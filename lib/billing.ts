import { Duration, Validations } from "aws-cdk-lib";
import { Alarm, ComparisonOperator, TreatMissingData } from "aws-cdk-lib/aws-cloudwatch";
import type { Function as LambdaFunction } from "aws-cdk-lib/aws-lambda";
import { SqsEventSource } from "aws-cdk-lib/aws-lambda-event-sources";
import { type CfnSecret, Secret } from "aws-cdk-lib/aws-secretsmanager";
import { Queue, QueueEncryption } from "aws-cdk-lib/aws-sqs";
import { Construct } from "constructs";
import { DmtFunction, type LambdaDefaults } from "./lambda-defaults";
import type { Store } from "./store";

export interface BillingProps {
  defaults: LambdaDefaults;
  store: Store;
  /** The OpenMeter-compatible endpoint (context `openMeterUrl`); unset: no OpenMeter exports. */
  openMeterUrl?: string;
  /** The CloudEvents `source` of the usage events: the deployment (default: the stack's name). */
  source: string;
}

/** The sender's limits: a batch of 10 messages of up to 100 events, 16 in flight to Stripe. */
const SENDER = { timeout: Duration.seconds(120), batchSize: 10, maxReceiveCount: 5 };

/**
 * Billing exports (docs/billing-exports.md): the meter queue the warehouse consumer fills, the sender
 * function behind it (Stripe meter events, OpenMeter CloudEvents) with partial batch failures, its
 * dead-letter queue and an alarm at its first message, and the deployment's credentials as secrets
 * created empty (the operator puts the Stripe key and the endpoint token in them).
 */
export class Billing extends Construct {
  readonly queue: Queue;
  readonly deadLetterQueue: Queue;
  readonly sender: DmtFunction;
  readonly deadLetterAlarm: Alarm;
  readonly stripeSecretKey: Secret;
  readonly openMeterToken: Secret;

  constructor(scope: Construct, id: string, props: BillingProps) {
    super(scope, id);
    this.deadLetterQueue = new Queue(this, "DeadLetterQueue", {
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: Duration.days(14),
    });
    this.queue = new Queue(this, "MeterQueue", {
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: Duration.days(4),
      // Six times the function's timeout, as Lambda's SQS event source advises.
      visibilityTimeout: Duration.seconds(SENDER.timeout.toSeconds() * 6),
      deadLetterQueue: { queue: this.deadLetterQueue, maxReceiveCount: SENDER.maxReceiveCount },
    });
    this.stripeSecretKey = this.emptySecret(
      "StripeSecretKey",
      "dmt: the Stripe secret key (or a restricted key that writes meter events) billing exports send with",
      "The key is issued in Stripe's dashboard; the operator rolls it there and puts the new value here.",
    );
    this.openMeterToken = this.emptySecret(
      "OpenMeterToken",
      "dmt: the bearer token of the OpenMeter-compatible endpoint billing exports post to",
      "The token is issued by the metering service; the operator rotates it there and puts the new value here.",
    );

    this.sender = new DmtFunction(this, "Sender", {
      handler: "meter-sender",
      description: "dmt: billing exports (Stripe meter events, OpenMeter CloudEvents)",
      defaults: props.defaults,
      timeout: SENDER.timeout,
      environment: {
        DMT_STRIPE_SECRET_ARN: this.stripeSecretKey.secretArn,
        DMT_OPENMETER_TOKEN_ARN: this.openMeterToken.secretArn,
        DMT_METER_SOURCE: props.source,
        ...(props.openMeterUrl !== undefined && { DMT_OPENMETER_URL: props.openMeterUrl }),
      },
    });
    const fn = this.sender.function;
    fn.addEventSource(
      new SqsEventSource(this.queue, { batchSize: SENDER.batchSize, reportBatchItemFailures: true }),
    );
    props.store.grant(fn, "billingMeter", ["BatchGetItem", "GetItem", "PutItem", "Query"]);
    this.stripeSecretKey.grantRead(fn);
    this.openMeterToken.grantRead(fn);

    this.deadLetterAlarm = new Alarm(this, "DeadLettersAlarm", {
      metric: this.deadLetterQueue.metricApproximateNumberOfMessagesVisible({
        statistic: "Maximum",
        period: Duration.minutes(5),
      }),
      alarmDescription:
        "Meter messages the billing sender kept failing on (Stripe or the endpoint down, or refusing the deployment's key) reached its dead-letter queue; their events wait: dmt billing status.",
      threshold: 1,
      evaluationPeriods: 1,
      datapointsToAlarm: 1,
      comparisonOperator: ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      treatMissingData: TreatMissingData.NOT_BREACHING,
    });
  }

  /** The warehouse consumer: notes each billable call and queues it. */
  connectConsumer(fn: LambdaFunction, store: Store): void {
    fn.addEnvironment("DMT_METER_QUEUE_URL", this.queue.queueUrl);
    this.queue.grantSendMessages(fn);
    store.grant(fn, "billingMeter", ["PutItem", "Query"]);
  }

  private emptySecret(id: string, description: string, reason: string): Secret {
    const secret = new Secret(this, id, { description });
    // Without a value CloudFormation creates the secret empty; CDK would otherwise generate a password.
    (secret.node.defaultChild as CfnSecret).addPropertyDeletionOverride("GenerateSecretString");
    Validations.of(secret).acknowledge({ id: "AwsSolutions-SMG4", reason });
    return secret;
  }
}
