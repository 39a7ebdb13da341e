import { type CfnElement, Duration, Stack, Validations } from "aws-cdk-lib";
import type { Alarm } from "aws-cdk-lib/aws-cloudwatch";
import { PolicyStatement } from "aws-cdk-lib/aws-iam";
import type { Queue } from "aws-cdk-lib/aws-sqs";
import { Construct } from "constructs";
import { INTERACTIONS_PREFIX } from "../lambda/core/record";
import { fanOut, runDaily } from "./daily-run";
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
    ({
      queue: this.queue,
      deadLetterQueue: this.deadLetterQueue,
      undoneAlarm: this.undoneAlarm,
    } = fanOut(this, fn, {
      queueId: "PartitionQueue",
      urlVariable: "DMT_PARTITION_QUEUE_URL",
      undone: {
        id: "PartitionsUndone",
        description:
          "Compaction partitions failed three times and were left undone (their messages are in the dead-letter queue): their small files stay until a run merges them.",
      },
      waiting: {
        id: "PartitionsWaiting",
        description:
          "A compaction partition has waited on the queue for a day: the workers do not keep up with the projects.",
      },
      observability: props.observability,
    }));
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
