import { Aws, type CfnResource, Duration, type RemovalPolicy, Stack, Token, Validations } from "aws-cdk-lib";
import { CfnWorkGroup } from "aws-cdk-lib/aws-athena";
import { Rule, Schedule } from "aws-cdk-lib/aws-events";
import { LambdaFunction } from "aws-cdk-lib/aws-events-targets";
import { CfnDatabase, CfnTable } from "aws-cdk-lib/aws-glue";
import { PolicyStatement } from "aws-cdk-lib/aws-iam";
import type { Function as LambdaFunctionResource } from "aws-cdk-lib/aws-lambda";
import { SqsEventSource } from "aws-cdk-lib/aws-lambda-event-sources";
import { BlockPublicAccess, Bucket, BucketEncryption, type IBucket } from "aws-cdk-lib/aws-s3";
import { Queue, QueueEncryption } from "aws-cdk-lib/aws-sqs";
import { Construct } from "constructs";
import { SPOOL_PREFIX } from "../lambda/adapters/sqs/spool";
import { DELETION_MANIFEST_PREFIX } from "../lambda/core/deletion-manifest";
import { ERASED_USAGE_PREFIX, ERASED_USAGE_TABLE, erasedUsageGlueColumns } from "../lambda/core/erased-usage";
import {
  glueColumns,
  gluePartitionKeys,
  glueProjectionParameters,
  INTERACTIONS_PREFIX,
  RECORD_SCHEMA_VERSION,
} from "../lambda/core/record";
import { DmtFunction, type LambdaDefaults } from "./lambda-defaults";
import type { Store } from "./store";

/** The consumer's settings (docs/aws.md, "The warehouse"): few, large Parquet files. */
export const CONSUMER = {
  timeout: Duration.seconds(60),
  memorySize: 1024,
  /** Lambda also stops filling a batch at 6 MB of messages. */
  batchSize: 10_000,
  maxBatchingWindow: Duration.seconds(60),
  /** The lowest SQS allows: two writers at a time keep files large and Athena scans cheap. */
  maxConcurrency: 2,
} as const;

export const QUEUE = {
  /** Six times the consumer's timeout, as Lambda recommends for SQS event sources. */
  visibilityTimeout: Duration.seconds(CONSUMER.timeout.toSeconds() * 6),
  /** SQS's largest message; a record's bodies are cut so that it always fits (record.ts). */
  maxMessageSizeBytes: 1024 * 1024,
  retention: Duration.days(14),
  /** Receives before SQS moves a message the consumer keeps failing on to the dead-letter queue. */
  maxReceiveCount: 5,
} as const;

/** How often the spool re-sender runs. */
export const SPOOL_SCHEDULE = Duration.minutes(5);

/** Athena's per-query scan limit by default: 10 GiB, about $0.05 per query at $5 per TB. */
export const DEFAULT_BYTES_SCANNED_CUTOFF = 10 * 1024 ** 3;

/**
 * The deletion workflow's by default: 1 TiB, about $5 per query. Its scans read a whole project's
 * history, which the exports' limit would stop for a large project, leaving a deletion undone.
 */
export const DEFAULT_DELETION_BYTES_SCANNED_CUTOFF = 1024 ** 4;

export const INTERACTIONS_TABLE = "interactions";

/** How long a bucket export stays in the stack's own export bucket. */
export const EXPORT_RETENTION = Duration.days(30);

/** Bucket names the data API may write exports to; `*` matches any characters (IAM). */
const EXPORT_BUCKET_PATTERN = /^[a-z0-9*][a-z0-9.*-]{0,62}$/;

export interface WarehouseProps {
  defaults: LambdaDefaults;
  store: Store;
  /** Of the buckets (and with RETAIN, whether their data outlives the stack). */
  removalPolicy: RemovalPolicy;
  /**
   * Buckets the data API may write bucket exports to, besides the stack's own export bucket: names,
   * or patterns with `*` (`acme-dmt-exports-*`). In the stack's region; see docs/aws.md.
   */
  exportBuckets?: string[];
  /** Athena's per-query scan limit in bytes (at least 10 MB); default 10 GiB. */
  bytesScannedCutoffPerQuery?: number;
  /** The same for the deletion workflow's own workgroup; default 1 TiB. */
  deletionBytesScannedCutoffPerQuery?: number;
}

/**
 * The warehouse in AWS: records arrive on an SQS queue (dead-letter queue after 5 receives), the
 * consumer writes them as Parquet to the data bucket under `interactions/project=<id>/dt=<day>/`, a
 * Glue table with partition projection describes those files, and an Athena workgroup queries them.
 * Records the queue refused are spooled to `queue-spool/` and re-sent on a schedule. Every bucket is
 * private, TLS-only, encrypted, and logs its accesses to the logs bucket.
 */
export class Warehouse extends Construct {
  readonly queue: Queue;
  readonly deadLetterQueue: Queue;
  readonly logsBucket: Bucket;
  readonly dataBucket: Bucket;
  readonly resultsBucket: Bucket;
  readonly exportBucket: Bucket;
  readonly database: CfnDatabase;
  readonly table: CfnTable;
  readonly erasedUsageTable: CfnTable;
  readonly workGroup: CfnWorkGroup;
  /** The deletion workflow's: its own scan limit, apart from the exports'. */
  readonly deletionWorkGroup: CfnWorkGroup;
  readonly consumer: DmtFunction;
  readonly spoolResender: DmtFunction;
  private readonly store: Store;
  /** Operator buckets (names or `*` patterns) the data API may write bucket exports to. */
  readonly exportBuckets: readonly string[];

  constructor(scope: Construct, id: string, props: WarehouseProps) {
    super(scope, id);
    this.store = props.store;
    const stack = Stack.of(this);
    if (Token.isUnresolved(stack.stackName)) throw new Error("The warehouse needs a literal stack name.");
    for (const name of props.exportBuckets ?? []) {
      if (!EXPORT_BUCKET_PATTERN.test(name)) {
        throw new Error(`Export bucket '${name}': a bucket name, or a pattern with '*' (acme-exports-*).`);
      }
    }
    const cutoff = props.bytesScannedCutoffPerQuery ?? DEFAULT_BYTES_SCANNED_CUTOFF;
    const deletionCutoff = props.deletionBytesScannedCutoffPerQuery ?? DEFAULT_DELETION_BYTES_SCANNED_CUTOFF;
    for (const [name, bytes] of [
      ["bytesScannedCutoffPerQuery", cutoff],
      ["deletionBytesScannedCutoffPerQuery", deletionCutoff],
    ] as const) {
      if (!Number.isInteger(bytes) || bytes < 10_000_000) {
        throw new Error(`${name} is a whole number of bytes, at least 10 MB.`);
      }
    }

    // --- Buckets
    this.logsBucket = new Bucket(this, "LogsBucket", {
      ...privateBucket(props.removalPolicy),
      lifecycleRules: [{ id: "expire-access-logs", expiration: Duration.days(90) }],
    });
    // No access logs of its own: cdk-nag counts a log destination as compliant (S1).
    const logged = (prefix: string) => ({
      serverAccessLogsBucket: this.logsBucket,
      serverAccessLogsPrefix: `${prefix}/`,
    });
    this.dataBucket = new Bucket(this, "DataBucket", {
      ...privateBucket(props.removalPolicy),
      ...logged("data"),
      // Versioned against mistakes, but a rewritten or deleted file (a deletion request) must really
      // be gone soon: old versions live one day.
      versioned: true,
      lifecycleRules: [
        {
          id: "expire-noncurrent-versions",
          noncurrentVersionExpiration: Duration.days(1),
          expiredObjectDeleteMarker: true,
          abortIncompleteMultipartUploadAfter: Duration.days(1),
        },
        // Deletion manifests (file keys, no row data) outlive any run (at most 12 h), for inspection.
        { id: "expire-deletion-manifests", prefix: DELETION_MANIFEST_PREFIX, expiration: Duration.days(14) },
      ],
    });
    this.resultsBucket = new Bucket(this, "AthenaResultsBucket", {
      ...privateBucket(props.removalPolicy),
      ...logged("athena-results"),
      // Query results hold whole exports; they are read right after the query.
      lifecycleRules: [
        {
          id: "expire-query-results",
          expiration: Duration.days(1),
          abortIncompleteMultipartUploadAfter: Duration.days(1),
        },
      ],
    });
    this.exportBucket = new Bucket(this, "ExportBucket", {
      ...privateBucket(props.removalPolicy),
      ...logged("exports"),
      lifecycleRules: [
        {
          id: "expire-exports",
          expiration: EXPORT_RETENTION,
          abortIncompleteMultipartUploadAfter: Duration.days(1),
        },
      ],
    });
    this.exportBuckets = props.exportBuckets ?? [];

    // --- Queue
    this.deadLetterQueue = new Queue(this, "DeadLetterQueue", {
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      maxMessageSizeBytes: QUEUE.maxMessageSizeBytes,
      retentionPeriod: QUEUE.retention,
    });
    this.queue = new Queue(this, "Queue", {
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      maxMessageSizeBytes: QUEUE.maxMessageSizeBytes,
      retentionPeriod: QUEUE.retention,
      visibilityTimeout: QUEUE.visibilityTimeout,
      deadLetterQueue: { queue: this.deadLetterQueue, maxReceiveCount: QUEUE.maxReceiveCount },
    });

    // --- Catalog and query engine
    const databaseName = `${stack.stackName.toLowerCase().replace(/[^a-z0-9]/g, "_")}_warehouse`;
    this.database = new CfnDatabase(this, "Database", {
      catalogId: Aws.ACCOUNT_ID,
      databaseInput: {
        name: databaseName,
        description: "dmt: the interaction records (lambda/core/record.ts)",
      },
    });
    const location = `s3://${this.dataBucket.bucketName}/${INTERACTIONS_PREFIX}`;
    this.table = new CfnTable(this, "InteractionsTable", {
      catalogId: Aws.ACCOUNT_ID,
      databaseName: this.database.ref,
      tableInput: {
        name: INTERACTIONS_TABLE,
        description: `dmt interaction records, schema version ${RECORD_SCHEMA_VERSION} (lambda/core/record.ts)`,
        tableType: "EXTERNAL_TABLE",
        parameters: { classification: "parquet", EXTERNAL: "TRUE", ...glueProjectionParameters(location) },
        partitionKeys: gluePartitionKeys(),
        storageDescriptor: {
          columns: glueColumns(),
          location,
          inputFormat: "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
          outputFormat: "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
          serdeInfo: {
            serializationLibrary: "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe",
            parameters: { "serialization.format": "1" },
          },
        },
      },
    });
    // What privacy deletions keep of the calls they remove (lambda/core/erased-usage.ts): summed, beside
    // the records, read by FOCUS exports.
    const erasedLocation = `s3://${this.dataBucket.bucketName}/${ERASED_USAGE_PREFIX}`;
    this.erasedUsageTable = new CfnTable(this, "ErasedUsageTable", {
      catalogId: Aws.ACCOUNT_ID,
      databaseName: this.database.ref,
      tableInput: {
        name: ERASED_USAGE_TABLE,
        description:
          "dmt erased usage: the sums of calls a privacy deletion removed (lambda/core/erased-usage.ts)",
        tableType: "EXTERNAL_TABLE",
        parameters: {
          classification: "parquet",
          EXTERNAL: "TRUE",
          ...glueProjectionParameters(erasedLocation),
        },
        partitionKeys: gluePartitionKeys(),
        storageDescriptor: {
          columns: erasedUsageGlueColumns(),
          location: erasedLocation,
          inputFormat: "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
          outputFormat: "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
          serdeInfo: {
            serializationLibrary: "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe",
            parameters: { "serialization.format": "1" },
          },
        },
      },
    });
    this.workGroup = this.newWorkGroup("WorkGroup", {
      name: `${stack.stackName}-warehouse`,
      description: "dmt: exports from the interaction records",
      cutoff,
    });
    this.deletionWorkGroup = this.newWorkGroup("DeletionWorkGroup", {
      name: `${stack.stackName}-deletion`,
      description: "dmt: the deletion workflow's scans of a project's records",
      cutoff: deletionCutoff,
    });

    // --- Consumer
    this.consumer = new DmtFunction(this, "Consumer", {
      handler: "consumer",
      description: "dmt: warehouse consumer (queue -> Parquet in S3)",
      defaults: props.defaults,
      timeout: CONSUMER.timeout,
      memorySize: CONSUMER.memorySize,
      environment: {
        DMT_WAREHOUSE_BUCKET: this.dataBucket.bucketName,
        DMT_DEAD_LETTER_QUEUE_URL: this.deadLetterQueue.queueUrl,
        DMT_TABLE_WAREHOUSEDELIVERIES: props.store.tables.warehouseDeliveries.tableName,
        DMT_TABLE_INTERACTIONS: props.store.tables.interactions.tableName,
        DMT_TABLE_USAGEROLLUPS: props.store.tables.usageRollups.tableName,
      },
    });
    const consumer = this.consumer.function;
    consumer.addEventSource(
      new SqsEventSource(this.queue, {
        batchSize: CONSUMER.batchSize,
        maxBatchingWindow: CONSUMER.maxBatchingWindow,
        maxConcurrency: CONSUMER.maxConcurrency,
        reportBatchItemFailures: true,
      }),
    );
    // It reads one byte of a file its ledger names to learn whether the file exists (a writer that
    // failed before its commit); listing lets S3 answer NoSuchKey rather than AccessDenied.
    this.grantList(consumer, this.dataBucket, INTERACTIONS_PREFIX);
    this.grantObjects(
      consumer,
      this.dataBucket,
      INTERACTIONS_PREFIX,
      // The object store streams a body that does not fit one part as a multipart upload, which it
      // aborts when a part fails: without the abort, failed uploads would linger until the lifecycle rule.
      ["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"],
      "The consumer writes Parquet files under interactions/ with names made at write time, and checks that a file its delivery ledger names is there.",
    );
    // Records a deletion covers that were never written keep their money as erased usage, written and
    // checked for as the records' files are.
    this.grantList(consumer, this.dataBucket, ERASED_USAGE_PREFIX);
    this.grantObjects(
      consumer,
      this.dataBucket,
      ERASED_USAGE_PREFIX,
      ["s3:GetObject", "s3:PutObject"],
      "The consumer writes the sums of records a deletion covers under erased-usage/ with names made at write time, and checks that a file its delivery ledger names is there.",
    );
    // The ledger: reads in batches, a conditional write per claimed id and one per file.
    props.store.grant(consumer, "warehouseDeliveries", ["BatchGetItem", "PutItem"]);
    // The dashboard's interactions index (entries read and written in batches) and its rollups.
    props.store.grant(consumer, "interactions", ["BatchGetItem", "BatchWriteItem"]);
    props.store.grant(consumer, "usageRollups", ["UpdateItem"]);
    // Poison records go to the dead-letter queue with their error (the consumer sends them itself).
    this.deadLetterQueue.grantSendMessages(consumer);

    // --- Spool re-sender
    this.spoolResender = new DmtFunction(this, "SpoolResender", {
      handler: "spool",
      description: "dmt: re-sends records the queue refused (queue-spool/ -> queue)",
      defaults: props.defaults,
      // Under the schedule's 5 minutes, so that runs do not pile up behind a slow one.
      timeout: Duration.minutes(4),
      environment: this.producerEnvironment(),
    });
    const resender = this.spoolResender.function;
    this.queue.grantSendMessages(resender);
    this.grantList(resender, this.dataBucket, SPOOL_PREFIX);
    this.grantObjects(
      resender,
      this.dataBucket,
      SPOOL_PREFIX,
      ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"],
      "The spool re-sender reads, rewrites and removes the spooled record files under queue-spool/, whose names are not known in advance.",
    );
    new Rule(this, "SpoolSchedule", {
      description: "dmt: re-send spooled warehouse records",
      schedule: Schedule.rate(SPOOL_SCHEDULE),
      // The next run comes soon enough; a failed one is not retried.
      targets: [new LambdaFunction(resender, { retryAttempts: 0 })],
    });
  }

  /** What a record producer needs: the queue, and the bucket whose `queue-spool/` keeps what it refused. */
  private producerEnvironment(): Record<string, string> {
    return { DMT_QUEUE_URL: this.queue.queueUrl, DMT_WAREHOUSE_BUCKET: this.dataBucket.bucketName };
  }

  /** An Athena workgroup over the warehouse: engine 3, results in the results bucket, a scan limit. */
  private newWorkGroup(
    id: string,
    props: { name: string; description: string; cutoff: number },
  ): CfnWorkGroup {
    return new CfnWorkGroup(this, id, {
      name: props.name,
      description: props.description,
      state: "ENABLED",
      // Lets CloudFormation delete the workgroup although it has run queries.
      recursiveDeleteOption: true,
      workGroupConfiguration: {
        enforceWorkGroupConfiguration: true,
        engineVersion: { selectedEngineVersion: "Athena engine version 3" },
        publishCloudWatchMetricsEnabled: true,
        bytesScannedCutoffPerQuery: props.cutoff,
        resultConfiguration: {
          outputLocation: `s3://${this.resultsBucket.bucketName}/`,
          encryptionConfiguration: { encryptionOption: "SSE_S3" },
          expectedBucketOwner: Aws.ACCOUNT_ID,
        },
      },
    });
  }

  /** A proxy function records its calls: it may send to the queue and spool what the queue refuses. */
  connectProducer(fn: LambdaFunctionResource): void {
    for (const [key, value] of Object.entries(this.producerEnvironment())) fn.addEnvironment(key, value);
    this.queue.grantSendMessages(fn);
    this.grantObjects(
      fn,
      this.dataBucket,
      SPOOL_PREFIX,
      ["s3:PutObject"],
      "A proxy function spools the records the queue refused as new files under queue-spool/ (unique names), and nothing else.",
    );
  }

  /**
   * The data API serves exports: Athena queries over the table (reading the data bucket, writing the
   * results bucket), the projects' export settings, and bucket exports to the allowed buckets.
   * `bucketExports: false` (the dashboard API): the queries only, no export bucket.
   */
  connectExports(fn: LambdaFunctionResource, options: { bucketExports?: boolean } = {}): void {
    const env = {
      DMT_ATHENA_WORKGROUP: this.workGroup.ref,
      DMT_WAREHOUSE_DATABASE: this.database.ref,
      DMT_WAREHOUSE_TABLE: INTERACTIONS_TABLE,
      DMT_TABLE_PROJECTSETTINGS: this.store.tables.projectSettings.tableName,
    };
    for (const [key, value] of Object.entries(env)) fn.addEnvironment(key, value);
    const stack = Stack.of(this);
    fn.addToRolePolicy(
      new PolicyStatement({
        // Stop: a query that outlives the export's time budget is ended.
        actions: [
          "athena:StartQueryExecution",
          "athena:GetQueryExecution",
          "athena:GetQueryResults",
          "athena:StopQueryExecution",
        ],
        resources: [
          stack.formatArn({ service: "athena", resource: "workgroup", resourceName: this.workGroup.ref }),
        ],
      }),
    );
    fn.addToRolePolicy(
      new PolicyStatement({
        actions: ["glue:GetDatabase", "glue:GetTable", "glue:GetPartitions"],
        resources: [
          stack.formatArn({ service: "glue", resource: "catalog" }),
          stack.formatArn({ service: "glue", resource: "database", resourceName: this.database.ref }),
          stack.formatArn({
            service: "glue",
            resource: "table",
            resourceName: `${this.database.ref}/${INTERACTIONS_TABLE}`,
          }),
          stack.formatArn({
            service: "glue",
            resource: "table",
            resourceName: `${this.database.ref}/${ERASED_USAGE_TABLE}`,
          }),
        ],
      }),
    );
    // Athena reads the Parquet files with the caller's permissions.
    this.grantList(fn, this.dataBucket, INTERACTIONS_PREFIX);
    this.grantObjects(
      fn,
      this.dataBucket,
      INTERACTIONS_PREFIX,
      ["s3:GetObject"],
      "Athena reads the Parquet files under interactions/ with the data API's permissions.",
    );
    this.grantList(fn, this.dataBucket, ERASED_USAGE_PREFIX);
    this.grantObjects(
      fn,
      this.dataBucket,
      ERASED_USAGE_PREFIX,
      ["s3:GetObject"],
      "FOCUS exports read the erased usage files under erased-usage/ (Athena, with the data API's permissions).",
    );
    // ... and writes the query results with them.
    fn.addToRolePolicy(
      new PolicyStatement({
        actions: ["s3:GetBucketLocation", "s3:ListBucket", "s3:ListBucketMultipartUploads"],
        resources: [this.resultsBucket.bucketArn],
      }),
    );
    this.grantObjects(
      fn,
      this.resultsBucket,
      "",
      ["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"],
      "Athena writes each query's results under a new name in its results bucket and reads them back.",
    );
    this.store.grant(fn, "projectSettings", ["GetItem"]);
    if (options.bucketExports === false) return;

    // Bucket exports: the whole body is streamed up (multipart), then handed out as a presigned GET,
    // which S3 checks against the signer's permissions.
    const exportActions = ["s3:PutObject", "s3:AbortMultipartUpload", "s3:GetObject"];
    this.grantObjects(
      fn,
      this.exportBucket,
      "",
      exportActions,
      "The data API writes bucket exports under each project's prefix in the stack's export bucket, with names made at export time.",
    );
    for (const name of this.exportBuckets) {
      const arn = `arn:${Aws.PARTITION}:s3:::${name}/*`;
      fn.addToRolePolicy(new PolicyStatement({ actions: exportActions, resources: [arn] }));
      Validations.of(fn.role ?? fn).acknowledge({
        id: `AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::${name}/*]`,
        reason: `The operator allowed bucket exports to ${name} (exportBuckets); export objects get new names at export time.`,
      });
    }
  }

  /**
   * The dashboard API's export downloads: the queries of `connectExports` (the results bucket's grant
   * covers its `dashboard-downloads/` objects, written and presigned there), no bucket exports.
   */
  connectDownloads(fn: LambdaFunctionResource): void {
    this.connectExports(fn, { bucketExports: false });
    fn.addEnvironment("DMT_ATHENA_RESULTS_BUCKET", this.resultsBucket.bucketName);
  }

  /** `s3:ListBucket` (and GetBucketLocation) limited to one prefix of the bucket. */
  private grantList(fn: LambdaFunctionResource, bucket: IBucket, prefix: string): void {
    fn.addToRolePolicy(
      new PolicyStatement({
        actions: ["s3:ListBucket"],
        resources: [bucket.bucketArn],
        conditions: { StringLike: { "s3:prefix": [`${prefix}*`] } },
      }),
    );
    fn.addToRolePolicy(
      new PolicyStatement({ actions: ["s3:GetBucketLocation"], resources: [bucket.bucketArn] }),
    );
  }

  /**
   * Exact object actions under one prefix. Object names are made at run time, so the resource ends in
   * `*`: cdk-nag's IAM5 finding for exactly that resource is acknowledged on the grantee, with why.
   */
  private grantObjects(
    fn: LambdaFunctionResource,
    bucket: Bucket,
    prefix: string,
    actions: string[],
    reason: string,
  ): void {
    fn.addToRolePolicy(new PolicyStatement({ actions, resources: [bucket.arnForObjects(`${prefix}*`)] }));
    const bucketId = Stack.of(this).getLogicalId(bucket.node.defaultChild as CfnResource);
    Validations.of(fn.role ?? fn).acknowledge({
      id: `AwsSolutions-IAM5[Resource::<${bucketId}.Arn>/${prefix}*]`,
      reason,
    });
  }
}

/** Private, TLS-only, encrypted with S3-managed keys (server access logs cannot go to a KMS bucket). */
function privateBucket(removalPolicy: RemovalPolicy) {
  return {
    encryption: BucketEncryption.S3_MANAGED,
    blockPublicAccess: BlockPublicAccess.BLOCK_ALL,
    enforceSSL: true,
    minimumTLSVersion: 1.2,
    removalPolicy,
  };
}
