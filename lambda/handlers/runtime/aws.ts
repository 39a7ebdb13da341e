import { AthenaClient } from "@aws-sdk/client-athena";
import { EventBridgeClient } from "@aws-sdk/client-eventbridge";
import { S3Client } from "@aws-sdk/client-s3";
import { SQSClient } from "@aws-sdk/client-sqs";
import { AthenaDeletionQuery } from "../../adapters/athena/deletion-query";
import { AthenaWarehouseQuery } from "../../adapters/athena/export-query";
import { DynamoMeterStore } from "../../adapters/dynamodb/billing-meter";
import { createDynamoClient } from "../../adapters/dynamodb/client";
import { DynamoExportSettings } from "../../adapters/dynamodb/export-settings";
import { DynamoDeliveryLedger } from "../../adapters/dynamodb/ledger";
import { DynamoPorts } from "../../adapters/dynamodb/ports";
import { type TableNames, tableNames } from "../../adapters/dynamodb/tables";
import { EventBridgePublisher } from "../../adapters/eventbridge/bus";
import { SignedEventBridgePublisher } from "../../adapters/eventbridge/signed-publisher";
import { createKmsClient, KmsKeyWrapper } from "../../adapters/kms/key-wrapper";
import { S3WarehouseFiles } from "../../adapters/s3/deletion-files";
import { S3ObjectStore } from "../../adapters/s3/object-store";
import { S3SpoolWriter } from "../../adapters/s3/spool-writer";
import {
  CachedSecret,
  createSecretsClient,
  secretUserIdHasher,
} from "../../adapters/secrets-manager/secrets";
import { SqsMeterQueue } from "../../adapters/sqs/meter-queue";
import { SqsDeadLetters, SqsRecordQueue } from "../../adapters/sqs/queue";
import { RecordSpool } from "../../adapters/sqs/spool";
import { type DownloadHost, s3Downloads } from "../../app/dashboard/downloads";
import type { Infrastructure } from "../../compose/infrastructure";
import { type MeterConfig, meterConfigOf } from "../../core/billing-meter";
import type { KeyWrapper } from "../../core/crypto";
import type { ExportDestination } from "../../core/export-destination";
import type { Logger } from "../../core/logger";
import { QueryResultsPurger } from "../../deletion/purgers";
import {
  type ConsumerConfig,
  type DashboardConfig,
  type DataApiConfig,
  type DeletionStepsConfig,
  parseBaseConfig,
  parseUserIdKeyConfig,
  type RecordQueueConfig,
} from "./config";
import { type LambdaTelemetry, lambdaTelemetry } from "./telemetry";

/**
 * The AWS host: what every function takes from it (clock, Powertools logger and metrics, the store
 * over DynamoDB), and one builder per further part, which a function's entry calls for the parts it
 * uses. Separate builders, not one object with every part: each bundle then holds only the clients
 * its function uses (the proxy's has no room for S3's or Athena's). Clients are made once per
 * container. Every `DMT_*_ENDPOINT` is unset in AWS; tests point them at local stand-ins.
 */
export interface AwsHost extends Pick<Infrastructure, "clock" | "logger" | "metrics"> {
  /** The store ports over DynamoDB; its client serves the few tables outside them. */
  store: DynamoPorts;
  telemetry: LambdaTelemetry;
}

type Env = Record<string, string | undefined>;

/**
 * The most items a key's rate-limit bucket is split over, in every function (the proxies and the data
 * API take from the same buckets, so all must agree): thousands of one-call containers take a token each
 * per call, which on one item caps a key near 1,000 calls a second (adapters/dynamodb/rate-limit.ts).
 */
const RATE_LIMIT_SHARDS = 16;

/** `function` names the function in every log line and metric (`proxy`, `data-api`, `sweeper`...). */
export function awsHost(env: Env, fn: string, options: { keyWrapper?: () => KeyWrapper } = {}): AwsHost {
  const telemetry = awsTelemetry(env, fn);
  const db = dynamoClient(env.DMT_DYNAMODB_ENDPOINT);
  const keyWrapper =
    options.keyWrapper ??
    (() => {
      throw new Error(`The ${fn} function has no key wrapper.`);
    });
  return {
    clock: Date.now,
    logger: telemetry.logger,
    metrics: telemetry.metrics,
    store: new DynamoPorts(db, tableNames(env), keyWrapper, Date.now, { shards: RATE_LIMIT_SHARDS }),
    telemetry,
  };
}

/** Powertools logs and metrics alone, for a function that uses no store (the spool re-sender). */
export function awsTelemetry(env: Env, fn: string): LambdaTelemetry {
  return lambdaTelemetry(parseBaseConfig(env), fn);
}

/** The KMS key that wraps customers' own vendor keys (`DMT_BYOK_KEY_ARN`). */
export function kmsKeyWrapper(config: { DMT_BYOK_KEY_ARN: string; DMT_KMS_ENDPOINT?: string | undefined }) {
  let wrapper: KmsKeyWrapper | undefined;
  return (): KeyWrapper => {
    wrapper ??= new KmsKeyWrapper(
      createKmsClient(config.DMT_KMS_ENDPOINT ? { endpoint: config.DMT_KMS_ENDPOINT } : {}),
      config.DMT_BYOK_KEY_ARN,
    );
    return wrapper;
  };
}

/**
 * The producer: records go to the queue in batched sends; what the queue refuses after retries is kept
 * under `queue-spool/` of the warehouse bucket, which the spool re-sender offers again on a schedule.
 */
export function sqsRecordQueue(
  config: RecordQueueConfig,
  logger: Logger,
): Pick<Infrastructure, "recordQueue"> {
  const sqs = sqsClient(config.DMT_SQS_ENDPOINT);
  const writer = new S3SpoolWriter({
    bucket: config.DMT_WAREHOUSE_BUCKET,
    ...(config.DMT_S3_ENDPOINT !== undefined && { endpoint: config.DMT_S3_ENDPOINT }),
    // The function's own credentials and region, as the SQS client resolved them.
    credentials: sqs.config.credentials,
    region: sqs.config.region,
  });
  return {
    recordQueue: new SqsRecordQueue(sqs, {
      queueUrl: config.DMT_QUEUE_URL,
      spool: new RecordSpool(writer, logger),
      logger,
    }),
  };
}

/** The spool re-sender's queue: it lists, reads, re-sends and removes what the producers spooled. */
export function spoolResender(config: RecordQueueConfig, logger: Logger): SqsRecordQueue {
  const spool = new RecordSpool(
    new S3ObjectStore(s3Client(config.DMT_S3_ENDPOINT), config.DMT_WAREHOUSE_BUCKET),
    logger,
  );
  return new SqsRecordQueue(sqsClient(config.DMT_SQS_ENDPOINT), {
    queueUrl: config.DMT_QUEUE_URL,
    spool,
    logger,
  });
}

/** The consumer's side of the warehouse: the bucket, the DynamoDB delivery ledger, the dead-letter queue. */
export function s3Warehouse(
  config: ConsumerConfig,
): Pick<Infrastructure, "warehouse" | "deliveries" | "deadLetters"> {
  const db = dynamoClient(config.DMT_DYNAMODB_ENDPOINT);
  return {
    warehouse: new S3ObjectStore(s3Client(config.DMT_S3_ENDPOINT), config.DMT_WAREHOUSE_BUCKET),
    deliveries: new DynamoDeliveryLedger(db, config.DMT_TABLE_WAREHOUSEDELIVERIES),
    deadLetters: new SqsDeadLetters(sqsClient(config.DMT_SQS_ENDPOINT), config.DMT_DEAD_LETTER_QUEUE_URL),
  };
}

/**
 * Longest wait for an export's Athena query before it is stopped, behind a buffered integration: inside
 * API Gateway's 29 s (and the HTTP API's 30 s), leaving time to read the results and answer.
 */
const ATHENA_TIMEOUT_MS = 20_000;

/** The data API's streaming integration runs for up to 15 minutes. */
export const DATA_API_STREAM_MINUTES = 15;

/**
 * Behind the data API's streaming integration: the query may take 13 of its 15 minutes, leaving two to
 * page the results out (a stream that still runs at the limit ends with the time-limit marker).
 */
export const STREAMING_ATHENA_TIMEOUT_MS = 13 * 60_000;

type ExportsConfig = Pick<
  DataApiConfig,
  | "DMT_ATHENA_WORKGROUP"
  | "DMT_WAREHOUSE_DATABASE"
  | "DMT_WAREHOUSE_TABLE"
  | "DMT_TABLE_PROJECTSETTINGS"
  | "DMT_ATHENA_ENDPOINT"
  | "DMT_S3_ENDPOINT"
  | "DMT_DYNAMODB_ENDPOINT"
>;

/** Exports: Athena over the warehouse, bucket-export settings in DynamoDB (destinations: `s3Destinations`). */
export function athenaExports(
  config: ExportsConfig,
  timeoutMs = ATHENA_TIMEOUT_MS,
): Pick<Infrastructure, "warehouseQuery" | "exportSettings"> {
  const db = dynamoClient(config.DMT_DYNAMODB_ENDPOINT);
  return {
    warehouseQuery: new AthenaWarehouseQuery(athenaClient(config.DMT_ATHENA_ENDPOINT), {
      ...athenaTable(config),
      timeoutMs,
    }),
    exportSettings: new DynamoExportSettings(db, config.DMT_TABLE_PROJECTSETTINGS),
  };
}

/** What a deletion finds (Athena), rewrites (the bucket) and purges besides (exports, query results). */
export function athenaDeletion(
  config: DeletionStepsConfig,
): Pick<
  Infrastructure,
  "deletionQuery" | "warehouse" | "warehouseFiles" | "hostPurgers" | "exportSettings" | "openDestination"
> {
  const db = dynamoClient(config.DMT_DYNAMODB_ENDPOINT);
  const s3 = s3Client(config.DMT_S3_ENDPOINT);
  return {
    deletionQuery: new AthenaDeletionQuery(athenaClient(config.DMT_ATHENA_ENDPOINT), {
      ...athenaTable(config),
      bucket: config.DMT_WAREHOUSE_BUCKET,
    }),
    // FindFiles' manifests, which the Distributed Map reads.
    warehouse: new S3ObjectStore(s3, config.DMT_WAREHOUSE_BUCKET),
    warehouseFiles: new S3WarehouseFiles(s3, config.DMT_WAREHOUSE_BUCKET),
    hostPurgers: [new QueryResultsPurger(new S3ObjectStore(s3, config.DMT_ATHENA_RESULTS_BUCKET))],
    exportSettings: new DynamoExportSettings(db, config.DMT_TABLE_PROJECTSETTINGS),
    openDestination: s3Destinations(config.DMT_S3_ENDPOINT),
  };
}

/** The warehouse's table in the Glue catalogue, and the workgroup its queries run in. */
function athenaTable(
  config: Pick<DataApiConfig, "DMT_ATHENA_WORKGROUP" | "DMT_WAREHOUSE_DATABASE" | "DMT_WAREHOUSE_TABLE">,
) {
  return {
    workGroup: config.DMT_ATHENA_WORKGROUP,
    database: config.DMT_WAREHOUSE_DATABASE,
    table: config.DMT_WAREHOUSE_TABLE,
  };
}

/** The dashboard's export downloads: written to the results bucket, handed out as presigned GETs. */
export function dashboardDownloads(
  config: Pick<DashboardConfig, "DMT_ATHENA_RESULTS_BUCKET" | "DMT_S3_ENDPOINT">,
): DownloadHost {
  return s3Downloads(new S3ObjectStore(s3Client(config.DMT_S3_ENDPOINT), config.DMT_ATHENA_RESULTS_BUCKET));
}

/** The stores behind bucket-export destinations: `s3://` only in AWS. */
export function s3Destinations(endpoint: string | undefined): Infrastructure["openDestination"] {
  return (destination: ExportDestination) => {
    // DynamoExportSettings stores s3:// destinations only.
    if (destination.kind !== "s3") throw new Error(`export destination ${destination.url} is not s3://`);
    return new S3ObjectStore(s3Client(endpoint), destination.bucket);
  };
}

/** One client per service and endpoint in a container (S3 then needs path-style addressing). */
const clients = new Map<string, unknown>();
function client<T>(service: string, endpoint: string | undefined, make: () => T): T {
  const key = `${service} ${endpoint ?? ""}`;
  if (!clients.has(key)) clients.set(key, make());
  return clients.get(key) as T;
}

const s3Client = (endpoint?: string) =>
  client("s3", endpoint, () => new S3Client(endpoint ? { endpoint, forcePathStyle: true } : {}));
const sqsClient = (endpoint?: string) =>
  client("sqs", endpoint, () => new SQSClient(endpoint ? { endpoint } : {}));
const athenaClient = (endpoint?: string) =>
  client("athena", endpoint, () => new AthenaClient(endpoint ? { endpoint } : {}));
const dynamoClient = (endpoint?: string) =>
  client("dynamodb", endpoint, () => createDynamoClient(endpoint ? { endpoint } : {}));

/** The keyed user-id hash of level `none`, its key the generated secret `DMT_USER_ID_KEY_SECRET_ARN`. */
export function secretUserIds(env: Env, logger: Logger): Pick<Infrastructure, "userIds"> {
  const config = parseUserIdKeyConfig(env);
  return {
    userIds: secretUserIdHasher(
      createSecretsClient(config.DMT_SECRETS_ENDPOINT),
      config.DMT_USER_ID_KEY_SECRET_ARN,
      logger,
    ),
  };
}

/** The warehouse files the retention run removes and rewrites, with their old versions. */
export function s3WarehouseFiles(config: {
  DMT_WAREHOUSE_BUCKET: string;
  DMT_S3_ENDPOINT?: string | undefined;
}): Pick<Infrastructure, "warehouse" | "warehouseFiles"> {
  const s3 = s3Client(config.DMT_S3_ENDPOINT);
  return {
    warehouse: new S3ObjectStore(s3, config.DMT_WAREHOUSE_BUCKET),
    warehouseFiles: new S3WarehouseFiles(s3, config.DMT_WAREHOUSE_BUCKET),
  };
}

/** The delivery ledger alone: compaction commits the files it merged before it removes them. */
export function dynamoDeliveryLedger(config: {
  DMT_DYNAMODB_ENDPOINT?: string | undefined;
  tables: TableNames;
}): Pick<Infrastructure, "deliveries"> {
  return {
    deliveries: new DynamoDeliveryLedger(
      dynamoClient(config.DMT_DYNAMODB_ENDPOINT),
      config.tables.warehouseDeliveries,
    ),
  };
}

/**
 * The proxy functions' publisher onto the stack's bus: signed requests without the EventBridge client
 * (the proxy bundle's budget), with the function's credentials and region as an SDK client's default
 * chain resolves them (the SQS client's: already in the bundle).
 */
export function signedEventBridgePublisher(config: {
  DMT_EVENTBRIDGE_ENDPOINT?: string | undefined;
  DMT_EVENT_BUS_NAME: string;
}): SignedEventBridgePublisher {
  const resolver = sqsClient();
  return new SignedEventBridgePublisher({
    busName: config.DMT_EVENT_BUS_NAME,
    ...(config.DMT_EVENTBRIDGE_ENDPOINT !== undefined && { endpoint: config.DMT_EVENTBRIDGE_ENDPOINT }),
    credentials: resolver.config.credentials,
    region: resolver.config.region,
  });
}

/** The stack's event bus, where events go for the user's own rules. */
export function eventBridgePublisher(config: {
  DMT_EVENTBRIDGE_ENDPOINT?: string | undefined;
  DMT_EVENT_BUS_NAME: string;
}): EventBridgePublisher {
  return new EventBridgePublisher(
    new EventBridgeClient(
      config.DMT_EVENTBRIDGE_ENDPOINT ? { endpoint: config.DMT_EVENTBRIDGE_ENDPOINT } : {},
    ),
    config.DMT_EVENT_BUS_NAME,
  );
}

/** Billing exports in the warehouse consumer: the status store and the meter queue (lib/billing.ts). */
export function awsMeterOutbox(
  config: {
    DMT_METER_QUEUE_URL: string;
    DMT_TABLE_BILLINGMETER: string;
    DMT_SQS_ENDPOINT?: string | undefined;
  },
  store: { db: DynamoPorts["db"] },
): { meterStore: DynamoMeterStore; meterQueue: SqsMeterQueue } {
  return {
    meterStore: new DynamoMeterStore(store.db, { billingMeter: config.DMT_TABLE_BILLINGMETER }),
    meterQueue: new SqsMeterQueue(sqsClient(config.DMT_SQS_ENDPOINT), config.DMT_METER_QUEUE_URL),
  };
}

/** The Stripe key and the endpoint token are read again after this long: a new value is used within it. */
const METER_SECRET_TTL_MS = 5 * 60_000;

/**
 * The billing sender's settings with the deployment's credentials from Secrets Manager; a secret still
 * empty (the stack creates them so) leaves its billing system unconfigured.
 */
export function awsMeterSettings(
  config: {
    DMT_STRIPE_SECRET_ARN?: string | undefined;
    DMT_OPENMETER_TOKEN_ARN?: string | undefined;
    DMT_OPENMETER_URL?: string | undefined;
    DMT_METER_SOURCE: string;
    DMT_SECRETS_ENDPOINT?: string | undefined;
  },
  logger: Logger,
): () => Promise<MeterConfig> {
  const client = createSecretsClient(config.DMT_SECRETS_ENDPOINT);
  const secret = (arn: string | undefined) =>
    arn === undefined
      ? undefined
      : new CachedSecret(client, arn, ["AWSCURRENT"], METER_SECRET_TTL_MS, logger);
  const stripe = secret(config.DMT_STRIPE_SECRET_ARN);
  const token = secret(config.DMT_OPENMETER_TOKEN_ARN);
  return async () => {
    const [stripeKey] = (await stripe?.values()) ?? [];
    const [openMeterToken] = (await token?.values()) ?? [];
    return meterConfigOf({
      DMT_METER_SOURCE: config.DMT_METER_SOURCE,
      ...(stripeKey && { DMT_STRIPE_SECRET_KEY: stripeKey }),
      ...(config.DMT_OPENMETER_URL && { DMT_OPENMETER_URL: config.DMT_OPENMETER_URL }),
      ...(openMeterToken && { DMT_OPENMETER_TOKEN: openMeterToken }),
    });
  };
}
