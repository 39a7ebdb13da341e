import { Aws, type CfnElement, Duration, RemovalPolicy, Stack, Token, Validations } from "aws-cdk-lib";
import type { CfnTable } from "aws-cdk-lib/aws-dynamodb";
import { type IGrantable, PolicyStatement, Role, ServicePrincipal } from "aws-cdk-lib/aws-iam";
import type { Function as LambdaFunctionResource } from "aws-cdk-lib/aws-lambda";
import { LogGroup } from "aws-cdk-lib/aws-logs";
import { CfnPipe } from "aws-cdk-lib/aws-pipes";
import type { IBucket } from "aws-cdk-lib/aws-s3";
import type { ISecret } from "aws-cdk-lib/aws-secretsmanager";
import { Queue, QueueEncryption } from "aws-cdk-lib/aws-sqs";
import {
  Choice,
  Condition,
  DefinitionBody,
  DistributedMap,
  Errors,
  Fail,
  type IChainable,
  type IItemReader,
  type INextable,
  JitterType,
  JsonPath,
  LogLevel,
  type QueryLanguage,
  S3JsonLItemReader,
  type State,
  StateMachine,
  StateMachineType,
  Succeed,
  TaskInput,
  Wait,
  WaitTime,
} from "aws-cdk-lib/aws-stepfunctions";
import { LambdaInvoke } from "aws-cdk-lib/aws-stepfunctions-tasks";
import { Construct } from "constructs";
import { DELETION_MANIFEST_PREFIX } from "../lambda/core/deletion-manifest";
import {
  DELETION_FAILED,
  DELETION_FAILURE_STEP,
  DELETION_STEPS,
  DELETION_SUCCEEDED,
  DeletionAlreadyCompletedError,
  type DeletionHandlerName,
  NOT_RETRIED,
  type RetryPolicy,
} from "../lambda/core/deletion-steps";
import { ERASED_USAGE_PREFIX } from "../lambda/core/erased-usage";
import { INTERACTIONS_PREFIX } from "../lambda/core/record";
import { DmtFunction, type LambdaDefaults } from "./lambda-defaults";
import type { Store } from "./store";
import { CONSUMER, INTERACTIONS_TABLE, QUEUE, type Warehouse } from "./warehouse";

/**
 * How long a record the consumer may already hold can still land after a tombstone is written: every
 * receive of a message (visibility timeout x receive count), plus the batching window.
 */
export const IN_FLIGHT_WINDOW = Duration.seconds(
  QUEUE.visibilityTimeout.toSeconds() * QUEUE.maxReceiveCount + CONSUMER.maxBatchingWindow.toSeconds(),
);

/**
 * The Distributed Map's ItemReader: FindFiles' JSON Lines manifest in the warehouse bucket. CDK's
 * reader would let the state machine read the whole bucket (the interaction data too); this one renders
 * the same ASL and grants `s3:GetObject` under `deletion-manifests/` only.
 */
class ManifestReader implements IItemReader {
  private readonly reader: S3JsonLItemReader;
  readonly resource: string;
  constructor(
    readonly bucket: IBucket,
    keyPath: string,
  ) {
    this.reader = new S3JsonLItemReader({ bucket, key: JsonPath.stringAt(keyPath) });
    this.resource = this.reader.resource;
  }
  render(queryLanguage?: QueryLanguage): unknown {
    return this.reader.render(queryLanguage);
  }
  providePolicyStatements(): PolicyStatement[] {
    return [
      new PolicyStatement({
        actions: ["s3:GetObject"],
        resources: [this.bucket.arnForObjects(`${DELETION_MANIFEST_PREFIX}*`)],
      }),
    ];
  }
  validateItemReader(): string[] {
    return this.reader.validateItemReader();
  }
}

/** How often the pipe tries to start a run from a request record, and for how long, before giving up. */
const PIPE_RETRIES = { attempts: 5, maxRecordAge: Duration.hours(1) };

/** The steps Lambda: Athena queries and Parquet rewrites of one file each. */
const STEPS_TIMEOUT = Duration.minutes(5);

export interface DeletionWorkflowProps {
  defaults: LambdaDefaults;
  /** Keys the user-id hash of level `none`: a user's deletion must find rows that hold it. */
  userIdKey: ISecret;
  store: Store;
  warehouse: Warehouse;
}

/**
 * The deletion workflow in AWS (docs/deletion.md): a Standard state machine built from the one
 * definition of the steps (lambda/core/deletion-steps.ts), whose tasks all invoke one Lambda
 * (lambda/handlers/deletion.ts), the handlers the local runner calls. A new item in the
 * `deletionRequests` table starts an execution through an EventBridge pipe on the table's stream, so
 * an accepted request cannot be left unstarted.
 */
export class DeletionWorkflow extends Construct {
  readonly steps: DmtFunction;
  readonly stateMachine: StateMachine;
  readonly logGroup: LogGroup;
  readonly pipe: CfnPipe;
  /** What the pipe gave up on: the stream records' positions (docs/aws.md, "Dead letters"). */
  readonly pipeDeadLetterQueue: Queue;
  readonly pipeLogGroup: LogGroup;
  private readonly store: Store;
  private readonly warehouseBucket: IBucket;

  constructor(scope: Construct, id: string, props: DeletionWorkflowProps) {
    super(scope, id);
    this.store = props.store;
    this.warehouseBucket = props.warehouse.dataBucket;
    const { warehouse, store } = props;

    this.steps = new DmtFunction(this, "Steps", {
      handler: "deletion",
      description: "dmt: deletion workflow steps (record, find, rewrite, purge, verify, fail)",
      defaults: props.defaults,
      timeout: STEPS_TIMEOUT,
      memorySize: 2048,
      environment: {
        DMT_TABLE_DELETIONREQUESTS: store.tables.deletionRequests.tableName,
        DMT_TABLE_DELETIONTOMBSTONES: store.tables.deletionTombstones.tableName,
        DMT_TABLE_PROJECTSETTINGS: store.tables.projectSettings.tableName,
        DMT_TABLE_INTERACTIONS: store.tables.interactions.tableName,
        DMT_TABLE_USAGEROLLUPS: store.tables.usageRollups.tableName,
        DMT_WAREHOUSE_BUCKET: warehouse.dataBucket.bucketName,
        DMT_ATHENA_WORKGROUP: warehouse.deletionWorkGroup.ref,
        DMT_WAREHOUSE_DATABASE: warehouse.database.ref,
        DMT_WAREHOUSE_TABLE: INTERACTIONS_TABLE,
        DMT_ATHENA_RESULTS_BUCKET: warehouse.resultsBucket.bucketName,
        DMT_USER_ID_KEY_SECRET_ARN: props.userIdKey.secretArn,
      },
    });
    // Rows of level `none` hold users as an HMAC under this key: a user's deletion computes it too.
    props.userIdKey.grantRead(this.steps.function);
    this.grantSteps(props);

    // The consumer drops what a tombstone covers.
    const consumer = warehouse.consumer.function;
    consumer.addEnvironment("DMT_TABLE_DELETIONTOMBSTONES", store.tables.deletionTombstones.tableName);
    store.grant(consumer, "deletionTombstones", ["Query"]);

    this.logGroup = new LogGroup(this, "Logs", {
      // Under /aws/vendedlogs/: Step Functions then delivers logs without adding this group to the
      // account's CloudWatch Logs resource policy, whose size limit fails the deploy in busy accounts.
      logGroupName: `/aws/vendedlogs/states/${Stack.of(this).stackName}-deletion`,
      retention: props.defaults.logRetention,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    this.stateMachine = new StateMachine(this, "StateMachine", {
      stateMachineType: StateMachineType.STANDARD,
      definitionBody: DefinitionBody.fromChainable(this.definition()),
      timeout: Duration.hours(12),
      tracingEnabled: true,
      // Inputs and outputs hold only ids and file keys, but they stay out of the logs all the same.
      logs: { destination: this.logGroup, level: LogLevel.ALL, includeExecutionData: false },
    });
    this.acknowledgeStateMachineRole();
    this.pipeLogGroup = new LogGroup(this, "PipeLogs", {
      logGroupName: `/aws/vendedlogs/pipes/${Stack.of(this).stackName}-deletion-requests`,
      retention: props.defaults.logRetention,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    this.pipeDeadLetterQueue = new Queue(this, "PipeDeadLetterQueue", {
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: Duration.days(14),
    });
    Validations.of(this.pipeDeadLetterQueue).acknowledge({
      id: "AwsSolutions-SQS3",
      reason:
        "This queue is the dead-letter queue of the deletion pipe (EventBridge Pipes' own setting, which cdk-nag does not see); nothing consumes it but the operator.",
    });
    this.pipe = this.startOnNewRequest();
  }

  /** The data API takes requests: it writes them (the stream starts the run) and reads them back. */
  connectDataApi(fn: LambdaFunctionResource): void {
    fn.addEnvironment("DMT_TABLE_DELETIONREQUESTS", this.store.tables.deletionRequests.tableName);
    this.store.grant(fn, "deletionRequests", ["PutItem", "GetItem", "Query"]);
  }

  /** The states, from DELETION_STEPS: one per step, a Choice after each step that may repeat. */
  private definition(): IChainable {
    const succeeded = new Succeed(this, DELETION_SUCCEEDED);
    const failed = new Fail(this, DELETION_FAILED, {
      error: "DeletionFailed",
      cause: "The deletion request failed; GET /api/v1/data/{request_id} says why.",
    });
    const markFailed = this.task(
      DELETION_FAILURE_STEP.name,
      DELETION_FAILURE_STEP.handler,
      DELETION_FAILURE_STEP.retry,
    );
    markFailed.next(failed);
    const catching = <T extends LambdaInvoke | DistributedMap>(state: T): T => {
      state.addCatch(succeeded, { errors: [DeletionAlreadyCompletedError.name] });
      state.addCatch(markFailed, { errors: [Errors.ALL], resultPath: "$.error" });
      return state;
    };

    const states = new Map<string, State & INextable>();
    // Where a transition to a step goes: the step, or the Choice that may skip it.
    const entries = new Map<string, State>();
    for (const step of DELETION_STEPS) {
      switch (step.kind) {
        case "wait":
          states.set(step.name, new Wait(this, step.name, { time: WaitTime.duration(IN_FLIGHT_WINDOW) }));
          break;
        case "task":
          states.set(step.name, catching(this.task(step.name, step.handler, step.retry)));
          break;
        case "map": {
          // A Distributed Map: its items are read from the manifest FindFiles wrote, and each file is
          // rewritten in a child execution of its own, so the parent's history (25,000 events) no
          // longer grows with the number of files (docs/deletion.md, "Scale").
          const map = new DistributedMap(this, step.name, {
            itemReader: new ManifestReader(this.warehouseBucket, `$.${step.manifest}`),
            itemSelector: {
              projectId: JsonPath.stringAt("$.projectId"),
              requestId: JsonPath.stringAt("$.requestId"),
              key: JsonPath.stringAt("$$.Map.Item.Value.key"),
            },
            // Standard children: a file's retries (up to ~6 Lambda timeouts) outlast Express's 5 minutes,
            // and each child runs exactly once.
            mapExecutionType: StateMachineType.STANDARD,
            maxConcurrency: step.maxConcurrency,
            toleratedFailurePercentage: step.toleratedFailurePercentage,
            label: step.name,
            // Each file's outcome is in the requests table; the state goes on unchanged.
            resultPath: JsonPath.DISCARD,
          });
          map.itemProcessor(this.task("RewriteFile", step.handler, step.retry));
          states.set(step.name, catching(map));
          break;
        }
      }
    }

    // A step that may be skipped is entered through its Choice.
    for (const step of DELETION_STEPS) {
      const state = states.get(step.name) as State;
      if (step.kind !== "map") {
        entries.set(step.name, state);
        continue;
      }
      const field = `$.${step.skip.field}`;
      entries.set(
        step.name,
        new Choice(this, step.skip.choice)
          .when(Condition.and(Condition.isPresent(field), Condition.numberGreaterThan(field, 0)), state)
          .otherwise(states.get(step.skip.goTo) as State),
      );
    }
    // Link each step to the next (through its Choice, if it may repeat); the last one to success.
    DELETION_STEPS.forEach((step, i) => {
      const state = states.get(step.name) as State & INextable;
      const nextStep = DELETION_STEPS[i + 1];
      const next = nextStep ? (entries.get(nextStep.name) as State) : succeeded;
      if (step.kind === "wait" || !step.repeat) {
        state.next(next);
        return;
      }
      const field = `$.${step.repeat.when}`;
      state.next(
        new Choice(this, step.repeat.choice)
          .when(
            Condition.and(Condition.isPresent(field), Condition.booleanEquals(field, true)),
            entries.get(step.repeat.goTo) as State,
          )
          .otherwise(next),
      );
    });
    return entries.get(DELETION_STEPS[0]?.name ?? "") as State;
  }

  /** A task invoking the steps Lambda with `{step, state}`; retried as its policy says. */
  private task(name: string, handler: DeletionHandlerName, retry: RetryPolicy): LambdaInvoke {
    const task = new LambdaInvoke(this, name, {
      lambdaFunction: this.steps.function,
      payload: TaskInput.fromObject({ step: handler, state: JsonPath.entirePayload }),
      payloadResponseOnly: true,
      // Our own retriers below cover Lambda's service errors too.
      retryOnServiceExceptions: false,
    });
    task.addRetry({ errors: [...NOT_RETRIED], maxAttempts: 0 });
    task.addRetry({
      errors: [Errors.ALL],
      maxAttempts: retry.maxAttempts,
      interval: Duration.seconds(retry.intervalSeconds),
      backoffRate: retry.backoffRate,
      maxDelay: Duration.seconds(retry.maxDelaySeconds),
      jitterStrategy: JitterType.FULL,
    });
    return task;
  }

  /** An EventBridge pipe from the requests table's stream: each new request item starts a run. */
  private startOnNewRequest(): CfnPipe {
    // The Store declares the tables; the stream is this workflow's concern, so it is switched on here.
    const table = this.store.tables.deletionRequests.node.defaultChild as CfnTable;
    table.streamSpecification = { streamViewType: "NEW_IMAGE" };
    const role = new Role(this, "PipeRole", { assumedBy: new ServicePrincipal("pipes.amazonaws.com") });
    role.addToPolicy(
      new PolicyStatement({
        actions: [
          "dynamodb:DescribeStream",
          "dynamodb:GetRecords",
          "dynamodb:GetShardIterator",
          "dynamodb:ListStreams",
        ],
        resources: [table.attrStreamArn],
      }),
    );
    this.stateMachine.grantStartExecution(role);
    this.pipeDeadLetterQueue.grantSendMessages(role);
    this.pipeLogGroup.grantWrite(role);
    const pipe = new CfnPipe(this, "StartOnRequest", {
      description: "dmt: a new deletion request starts the deletion workflow",
      roleArn: role.roleArn,
      source: table.attrStreamArn,
      sourceParameters: {
        dynamoDbStreamParameters: {
          startingPosition: "LATEST",
          batchSize: 1,
          // A record that cannot start a run goes to the dead-letter queue after a few tries, instead of
          // holding its shard until the stream drops it (24 hours).
          maximumRetryAttempts: PIPE_RETRIES.attempts,
          maximumRecordAgeInSeconds: PIPE_RETRIES.maxRecordAge.toSeconds(),
          deadLetterConfig: { arn: this.pipeDeadLetterQueue.queueArn },
        },
        // Request items only: the per-file progress items share the table.
        filterCriteria: {
          filters: [
            {
              pattern: JSON.stringify({
                eventName: ["INSERT"],
                dynamodb: { NewImage: { kind: { S: ["request"] } } },
              }),
            },
          ],
        },
      },
      target: this.stateMachine.stateMachineArn,
      // Failures only, without the records (they hold ids only, but stay out of logs all the same).
      logConfiguration: {
        level: "ERROR",
        cloudwatchLogsLogDestination: { logGroupArn: this.pipeLogGroup.logGroupArn },
      },
      targetParameters: {
        stepFunctionStateMachineParameters: { invocationType: "FIRE_AND_FORGET" },
        inputTemplate:
          '{"projectId": "<$.dynamodb.NewImage.projectId.S>", "requestId": "<$.dynamodb.NewImage.itemId.S>"}',
      },
    });
    pipe.node.addDependency(role);
    return pipe;
  }

  /** What the steps do: DynamoDB items, Athena queries, Parquet rewrites, purges of exports and results. */
  private grantSteps({ store, warehouse }: DeletionWorkflowProps): void {
    const fn = this.steps.function;
    store.grant(fn, "deletionRequests", ["GetItem", "PutItem", "UpdateItem", "Query"]);
    store.grant(fn, "deletionTombstones", ["PutItem"]);
    store.grant(fn, "projectSettings", ["GetItem"]);
    // The dashboard's interactions index: a user's interactions found in the project's packs, the
    // packs that hold purged ones rewritten (or deleted) and their pointers deleted; entries written
    // before packs read and deleted. The rollups keep the figures; the user's usage rows (a Query of the
    // project's user rows) move to deleted users' rows: named (UpdateItem), copied (PutItem), removed.
    store.grant(fn, "interactions", [
      "Query",
      "GetItem",
      "BatchGetItem",
      "PutItem",
      "DeleteItem",
      "BatchWriteItem",
    ]);
    store.grant(fn, "usageRollups", ["Query", "UpdateItem", "PutItem", "DeleteItem"]);

    const stack = Stack.of(this);
    fn.addToRolePolicy(
      new PolicyStatement({
        actions: ["athena:StartQueryExecution", "athena:GetQueryExecution", "athena:GetQueryResults"],
        resources: [
          stack.formatArn({
            service: "athena",
            resource: "workgroup",
            resourceName: warehouse.deletionWorkGroup.ref,
          }),
        ],
      }),
    );
    fn.addToRolePolicy(
      new PolicyStatement({
        actions: ["glue:GetDatabase", "glue:GetTable", "glue:GetPartitions"],
        resources: [
          stack.formatArn({ service: "glue", resource: "catalog" }),
          stack.formatArn({ service: "glue", resource: "database", resourceName: warehouse.database.ref }),
          stack.formatArn({
            service: "glue",
            resource: "table",
            resourceName: `${warehouse.database.ref}/${INTERACTIONS_TABLE}`,
          }),
        ],
      }),
    );

    // The warehouse files: read (Athena and the rewrite), replaced, removed with every old version.
    this.grantBucket(fn, warehouse.dataBucket, INTERACTIONS_PREFIX, [
      "s3:ListBucket",
      "s3:ListBucketVersions",
    ]);
    this.grantObjects(
      fn,
      warehouse.dataBucket,
      INTERACTIONS_PREFIX,
      ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:DeleteObjectVersion"],
      "The deletion steps read, rewrite and remove Parquet files under interactions/, and delete their old versions; which files is known only at run time.",
    );
    // The rewrite keeps the removed calls' money as erased usage, and removes it again when another
    // writer changed the file first.
    this.grantObjects(
      fn,
      warehouse.dataBucket,
      ERASED_USAGE_PREFIX,
      ["s3:PutObject", "s3:DeleteObject"],
      "The rewrite step writes the sums of the calls it removes under erased-usage/ (one file per warehouse file and version, named at run time).",
    );
    // FindFiles writes each round's manifest, which the Distributed Map reads (the state machine's grant).
    this.grantObjects(
      fn,
      warehouse.dataBucket,
      DELETION_MANIFEST_PREFIX,
      ["s3:PutObject"],
      "FindFiles writes one manifest per deletion request and round under deletion-manifests/, named at run time.",
    );
    // Athena's results: written by the queries, read back, and purged when they hold deleted rows.
    this.grantBucket(fn, warehouse.resultsBucket, "", ["s3:ListBucket", "s3:ListBucketMultipartUploads"]);
    this.grantObjects(
      fn,
      warehouse.resultsBucket,
      "",
      [
        "s3:GetObject",
        "s3:PutObject",
        "s3:DeleteObject",
        "s3:AbortMultipartUpload",
        "s3:ListMultipartUploadParts",
      ],
      "Athena writes each query's results under a new name; the deletion steps read them and delete the results of exports that hold deleted rows.",
    );
    // Bucket exports in the stack's export bucket that hold deleted rows are deleted.
    this.grantBucket(fn, warehouse.exportBucket, "", ["s3:ListBucket"]);
    this.grantObjects(
      fn,
      warehouse.exportBucket,
      "",
      ["s3:GetObject", "s3:DeleteObject"],
      "The deletion steps read the bucket exports of a project (names made at export time) and delete those holding deleted rows.",
    );
    // The same in the operator's buckets that exports may go to: a project exporting there has copies
    // to purge too.
    for (const name of warehouse.exportBuckets) {
      fn.addToRolePolicy(
        new PolicyStatement({ actions: ["s3:ListBucket"], resources: [`arn:${Aws.PARTITION}:s3:::${name}`] }),
      );
      fn.addToRolePolicy(
        new PolicyStatement({
          actions: ["s3:GetObject", "s3:DeleteObject"],
          resources: [`arn:${Aws.PARTITION}:s3:::${name}/*`],
        }),
      );
      const reason = `The operator allowed bucket exports to ${name} (exportBuckets); the deletion steps list and read a project's exports there and delete those holding deleted rows.`;
      const resources = [`${name}/*`, ...(name.includes("*") ? [name] : [])];
      for (const resource of resources) {
        Validations.of(fn.role ?? fn).acknowledge({
          id: `AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::${resource}]`,
          reason,
        });
      }
    }
  }

  private grantBucket(fn: IGrantable, bucket: IBucket, prefix: string, actions: string[]): void {
    fn.grantPrincipal.addToPrincipalPolicy(
      new PolicyStatement({
        actions,
        resources: [bucket.bucketArn],
        ...(prefix && { conditions: { StringLike: { "s3:prefix": [`${prefix}*`] } } }),
      }),
    );
    fn.grantPrincipal.addToPrincipalPolicy(
      new PolicyStatement({ actions: ["s3:GetBucketLocation"], resources: [bucket.bucketArn] }),
    );
  }

  /** Object actions under a prefix: the names are made at run time, so cdk-nag's IAM5 is acknowledged. */
  private grantObjects(
    fn: LambdaFunctionResource,
    bucket: IBucket,
    prefix: string,
    actions: string[],
    reason: string,
  ) {
    fn.addToRolePolicy(new PolicyStatement({ actions, resources: [bucket.arnForObjects(`${prefix}*`)] }));
    const bucketId = Stack.of(this).getLogicalId(bucket.node.defaultChild as CfnElement);
    Validations.of(fn.role ?? fn).acknowledge({
      id: `AwsSolutions-IAM5[Resource::<${bucketId}.Arn>/${prefix}*]`,
      reason,
    });
  }

  private acknowledgeStateMachineRole(): void {
    const role = this.stateMachine.role;
    const fnId = Stack.of(this).getLogicalId(this.steps.function.node.defaultChild as CfnElement);
    Validations.of(role).acknowledge({
      id: `AwsSolutions-IAM5[Resource::<${fnId}.Arn>:*]`,
      reason:
        "Step Functions may invoke the deletion steps function under any of its versions or aliases; it is the only function the state machine invokes.",
    });
    Validations.of(role).acknowledge({
      id: "AwsSolutions-IAM5[Resource::*]",
      reason:
        "X-Ray tracing and CloudWatch Logs delivery for Step Functions have no resource-level permissions; AWS documents these actions with the resource '*'.",
    });
    const bucketId = Stack.of(this).getLogicalId(this.warehouseBucket.node.defaultChild as CfnElement);
    Validations.of(role).acknowledge({
      id: `AwsSolutions-IAM5[Resource::<${bucketId}.Arn>/${DELETION_MANIFEST_PREFIX}*]`,
      reason:
        "The Distributed Map reads the manifest FindFiles wrote for the request and round, named at run time under deletion-manifests/.",
    });
    // CDK's grant to the Distributed Map: start, watch and stop its own child executions.
    const stack = Stack.of(this);
    const machineId = stack.getLogicalId(this.stateMachine.node.defaultChild as CfnElement);
    // cdk-nag names the ARN as synthesized: a known region, partition or account is literal in it.
    const part = (value: string, pseudo: string) => (Token.isUnresolved(value) ? `<AWS::${pseudo}>` : value);
    const arn = `arn:${part(stack.partition, "Partition")}:states:${part(stack.region, "Region")}:${part(stack.account, "AccountId")}`;
    const executions = `${arn}:execution:{"Fn::Select":[6,{"Fn::Split":[":",{"Ref":"${machineId}"}]}]}`;
    const mapPolicy = this.stateMachine.node.findChild("DistributedMapPolicy");
    for (const resource of [`${executions}:*`, `${executions}/RewriteFiles:*`]) {
      Validations.of(mapPolicy).acknowledge({
        id: `AwsSolutions-IAM5[Resource::${resource}]`,
        reason:
          "The Distributed Map starts, describes and stops child executions of this state machine, whose names Step Functions makes at run time.",
      });
    }
  }
}
