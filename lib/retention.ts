import { type CfnElement, Duration, Stack, Validations } from "aws-cdk-lib";
import type { Alarm } from "aws-cdk-lib/aws-cloudwatch";
import { PolicyStatement } from "aws-cdk-lib/aws-iam";
import type { Queue } from "aws-cdk-lib/aws-sqs";
import { Construct } from "constructs";
import { ERASED_USAGE_PREFIX } from "../lambda/core/erased-usage";
import { INTERACTIONS_PREFIX } from "../lambda/core/record";
import { RETENTION_AUDIT_PREFIX } from "../lambda/warehouse/retention";
import { fanOut, runDaily } from "./daily-run";
import { DmtFunction, type LambdaDefaults } from "./lambda-defaults";
import type { Observability } from "./observability";
import type { Store } from "./store";
import type { Warehouse } from "./warehouse";

export interface RetentionProps {
  defaults: LambdaDefaults;
  store: Store;
  warehouse: Warehouse;
  observability: Observability;
}

/** What the retention run keeps beside the warehouse files: which files are body-free, its audit. */
const STATE_PREFIXES = [INTERACTIONS_PREFIX, ERASED_USAGE_PREFIX, "retention-state/", RETENTION_AUDIT_PREFIX];

/**
 * Retention (`lambda/handlers/retention.ts`), fanned out as compaction is, so that it scales with
 * projects. Once a day at 03:15 UTC the function plans: it lists the projects with a limit and queues
 * one message per project. The same function then takes the queue, one project an invocation and up
 * to 5 at once: it removes the day partitions past the project's retention, drops older bodies, holds
 * the dashboard's index to the same limits, and leaves an audit entry under `retention-audit/`
 * (docs/privacy.md). A project whose run fails is tried 3 times, then its message goes to a
 * dead-letter queue: the projects left undone, which an alarm watches, as it does a queue whose oldest
 * project waited past the next run.
 */
export class Retention extends Construct {
  readonly fn: DmtFunction;
  readonly queue: Queue;
  readonly deadLetterQueue: Queue;
  /** Projects left undone: their messages in the dead-letter queue. */
  readonly undoneAlarm: Alarm;

  constructor(scope: Construct, id: string, props: RetentionProps) {
    super(scope, id);
    const { store, warehouse } = props;
    this.fn = new DmtFunction(this, "Function", {
      handler: "retention",
      description: "dmt: removes warehouse data past each project's retention (daily)",
      defaults: props.defaults,
      timeout: Duration.minutes(15),
      memorySize: 2048,
      environment: { DMT_WAREHOUSE_BUCKET: warehouse.dataBucket.bucketName },
    });
    const fn = this.fn.function;
    ({
      queue: this.queue,
      deadLetterQueue: this.deadLetterQueue,
      undoneAlarm: this.undoneAlarm,
    } = fanOut(this, fn, {
      queueId: "ProjectQueue",
      urlVariable: "DMT_PROJECT_QUEUE_URL",
      undone: {
        id: "ProjectsUndone",
        description:
          "Retention runs of projects failed three times and were left undone (their messages are in the dead-letter queue): their expired data stays until a run removes it.",
      },
      waiting: {
        id: "ProjectsWaiting",
        description:
          "A project has waited on the retention queue for a day: the workers do not keep up with the projects.",
      },
      observability: props.observability,
    }));
    // The list to plan from; a worker reads its project's limits again.
    store.grant(fn, "projects", ["Scan", "GetItem"]);
    // The index: a project's entries by day range, read and removed or rewritten without bodies.
    store.grant(fn, "interactions", ["Query", "GetItem", "PutItem", "DeleteItem", "BatchWriteItem"]);

    const bucket = warehouse.dataBucket;
    fn.addToRolePolicy(
      new PolicyStatement({
        actions: ["s3:ListBucket", "s3:ListBucketVersions"],
        resources: [bucket.bucketArn],
        conditions: { StringLike: { "s3:prefix": STATE_PREFIXES.map((p) => `${p}*`) } },
      }),
    );
    const bucketId = Stack.of(this).getLogicalId(bucket.node.defaultChild as CfnElement);
    for (const prefix of STATE_PREFIXES) {
      fn.addToRolePolicy(
        new PolicyStatement({
          actions: ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:DeleteObjectVersion"],
          resources: [bucket.arnForObjects(`${prefix}*`)],
        }),
      );
      Validations.of(fn.role ?? fn).acknowledge({
        id: `AwsSolutions-IAM5[Resource::<${bucketId}.Arn>/${prefix}*]`,
        reason:
          "The retention run removes or rewrites the Parquet files of expired days (with their old versions) and keeps its notes and audit; the names are known only at run time.",
      });
    }

    runDaily(this, fn, {
      hour: "3",
      minute: "15",
      description: "dmt: daily retention run",
      whenFailing: "The daily retention run failed: expired data stays until a run succeeds.",
      observability: props.observability,
    });
  }
}
