import { type CfnElement, Duration, Stack, Validations } from "aws-cdk-lib";
import { PolicyStatement } from "aws-cdk-lib/aws-iam";
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

/**
 * The compaction run (`lambda/handlers/compaction.ts`) once a day at 00:45 UTC, when the day before
 * has closed: merges each project's small consumer files of the last 15 closed days into files of up
 * to ~32 MB, under a lease per partition (docs/warehouse.md).
 */
export class Compaction extends Construct {
  readonly fn: DmtFunction;

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
