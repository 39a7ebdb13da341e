import { type CfnElement, Duration, Stack, Validations } from "aws-cdk-lib";
import { Alarm, ComparisonOperator, TreatMissingData } from "aws-cdk-lib/aws-cloudwatch";
import { PolicyStatement } from "aws-cdk-lib/aws-iam";
import { SqsEventSource } from "aws-cdk-lib/aws-lambda-event-sources";
import { Queue, QueueEncryption } from "aws-cdk-lib/aws-sqs";
import { Construct } from "constructs";
import { INTERACTIONS_PREFIX } from "../lambda/core/record";
import { runDaily } from "./daily-run";
import { DmtFunction, type LambdaDefaults } from "./lambda-defaults";
import type { Observability } from "./observability";
import type { Store } from "./store";
import type { Warehouse } from "./warehouse";

export interface CompactionProps {
  defaults: LambdaDefaults;
  store: Store;
  warehouse: Warehouse;
  observability: Observability;
}

/** Workers at once: each merges one partition of up to 32 MB; S3 and DynamoDB take far more. */
const WORKERS = 5;
/** Tries of a partition before its message goes to the dead-letter queue (left undone, alarmed). */
const TRIES = 3;

/**
 * Compaction (`lambda/handlers/compaction.ts`), fanned out so that it scales with projects. Once a day
 * at 00:45 UTC, when the day before has closed, the function plans: it lists each project's closed days
 * of the last 15 with small consumer files to merge and queues one message per partition. The same
 * function then takes the queue, one partition an invocation and up to 5 at once, each under the
 * partition's lease (docs/warehouse.md). A partition whose merge fails is tried 3 times, then its
 * message goes to a dead-letter queue: the partitions left undone, which an alarm watches, as it does
 * a queue whose oldest partition waited past the next run.
 */
export class Compaction extends Construct {
  readonly fn: DmtFunction;
  readonly queue: Queue;
  readonly deadLetterQueue: Queue;
  /** Partitions left undone: their messages in the dead-letter queue, or waiting a day. */
  readonly undoneAlarm: Alarm;

  constructor(scope: Construct, id: string, props: CompactionProps) {
    super(scope, id);
    const { store, warehouse } = props;
    this.fn = new DmtFunction(this, "Function", {
      handler: "compaction",
      description: "dmt: merges each closed day's small warehouse files (daily)",
      defaults: props.defaults,
      // Shorter than a partition lease (20 minutes, lambda/core/compaction.ts): no holder outlives it.
      timeout: Duration.minutes(15),
      // A merge holds its inputs decoded: up to 32 MB of Parquet, about a million rows.
      memorySize: 4096,
      environment: { DMT_WAREHOUSE_BUCKET: warehouse.dataBucket.bucketName },
    });
    const fn = this.fn.function;
    this.deadLetterQueue = new Queue(this, "UndoneQueue", {
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: Duration.days(14),
    });
    this.queue = new Queue(this, "PartitionQueue", {
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: Duration.days(4),
      // Six times the function's timeout, as Lambda's SQS event source advises.
      visibilityTimeout: Duration.minutes(15 * 6),
      deadLetterQueue: { queue: this.deadLetterQueue, maxReceiveCount: TRIES },
    });
    fn.addEnvironment("DMT_PARTITION_QUEUE_URL", this.queue.queueUrl);
    this.queue.grantSendMessages(fn);
    fn.addEventSource(
      new SqsEventSource(this.queue, {
        batchSize: 1,
        maxConcurrency: WORKERS,
        reportBatchItemFailures: true,
      }),
    );
    this.undoneAlarm = new Alarm(this, "PartitionsUndone", {
      metric: this.deadLetterQueue.metricApproximateNumberOfMessagesVisible({
        statistic: "Maximum",
        period: Duration.minutes(15),
      }),
      alarmDescription:
        "Compaction partitions failed three times and were left undone (their messages are in the dead-letter queue): their small files stay until a run merges them.",
      threshold: 1,
      evaluationPeriods: 1,
      comparisonOperator: ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      treatMissingData: TreatMissingData.NOT_BREACHING,
    });
    props.observability.alarms.push(this.undoneAlarm);
    props.observability.alarms.push(
      new Alarm(this, "PartitionsWaiting", {
        metric: this.queue.metricApproximateAgeOfOldestMessage({
          statistic: "Maximum",
          period: Duration.minutes(15),
        }),
        alarmDescription:
          "A compaction partition has waited on the queue for a day: the workers do not keep up with the projects.",
        threshold: Duration.days(1).toSeconds(),
        evaluationPeriods: 1,
        comparisonOperator: ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treatMissingData: TreatMissingData.NOT_BREACHING,
      }),
    );
    store.grant(fn, "projects", ["Scan"]);
    store.grant(fn, "warehouseLeases", ["UpdateItem", "DeleteItem"]);
    store.grant(fn, "deletionTombstones", ["Query"]);
    // Merged inputs are committed before they go: their records stay known as written.
    store.grant(fn, "warehouseDeliveries", ["PutItem"]);

    const bucket = warehouse.dataBucket;
    fn.addToRolePolicy(
      new PolicyStatement({
        actions: ["s3:ListBucket", "s3:ListBucketVersions"],
        resources: [bucket.bucketArn],
        conditions: { StringLike: { "s3:prefix": [`${INTERACTIONS_PREFIX}*`] } },
      }),
    );
    fn.addToRolePolicy(
      new PolicyStatement({
        actions: ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:DeleteObjectVersion"],
        resources: [bucket.arnForObjects(`${INTERACTIONS_PREFIX}*`)],
      }),
    );
    const bucketId = Stack.of(this).getLogicalId(bucket.node.defaultChild as CfnElement);
    Validations.of(fn.role ?? fn).acknowledge({
      id: `AwsSolutions-IAM5[Resource::<${bucketId}.Arn>/${INTERACTIONS_PREFIX}*]`,
      reason:
        "Compaction reads a day's Parquet files, writes their merge and removes them (with their old versions); the names are known only at run time.",
    });

    runDaily(this, fn, {
      hour: "0",
      minute: "45",
      description: "dmt: daily warehouse compaction",
      whenFailing: "The daily compaction run failed: small files pile up until a run succeeds.",
      observability: props.observability,
    });
  }
}
