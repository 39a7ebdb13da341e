import { type CfnElement, Duration, Stack, Validations } from "aws-cdk-lib";
import { PolicyStatement } from "aws-cdk-lib/aws-iam";
import { Construct } from "constructs";
import { INTERACTIONS_PREFIX } from "../lambda/core/record";
import { RETENTION_AUDIT_PREFIX } from "../lambda/warehouse/retention";
import { runDaily } from "./daily-run";
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
const STATE_PREFIXES = [INTERACTIONS_PREFIX, "retention-state/", RETENTION_AUDIT_PREFIX];

/**
 * The retention run (`lambda/handlers/retention.ts`) once a day at 03:15 UTC: removes the day
 * partitions past each project's retention, drops older bodies, holds the dashboard's index to the
 * same limits, and leaves an audit entry under `retention-audit/` (docs/privacy.md).
 */
export class Retention extends Construct {
  readonly fn: DmtFunction;

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
    store.grant(fn, "projects", ["Scan"]);
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
