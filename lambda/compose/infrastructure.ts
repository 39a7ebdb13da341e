import type { EventPublisher } from "../core/cloudevent";
import type { CopyPurger, DeletionQuery, WarehouseFiles } from "../core/deletion";
import type { DeliveryLedger } from "../core/delivery-ledger";
import type { ExportDestination, ExportSettingsStore } from "../core/export-destination";
import type { EncodedRowSource, UsageGroupSource, WarehouseQuery } from "../core/export-query";
import type { Logger } from "../core/logger";
import type { Metrics } from "../core/metrics";
import type { ObjectStore } from "../core/object-store";
import type { UserIdHasher } from "../core/privacy";
import type { DeadLetterSink, RecordQueue } from "../core/queue";
import type { StorePorts } from "../core/store-ports";
import type { DeliveryLog, DeliveryQueue, WebhookSender, WebhookStore } from "../core/webhook-delivery";

/**
 * Everything a deployable needs from the host it runs on. Two hosts build one: AWS
 * (`handlers/runtime/aws.ts`: DynamoDB, S3, SQS, Athena, KMS, EventBridge, each client made once per
 * container) and the embedded host (dynalite, files, the in-process queues, DuckDB, the local master
 * key: built in `local/host.ts` and `local/events.ts`, and for the warehouse's threads in
 * `local/warehouse.ts` and `local/deletion.ts`). Every part is a port of `core/`. The compositions in
 * this folder take what they use of it (`Pick<Infrastructure, ...>`), so each local test runs the same
 * assembly that is deployed.
 */
export interface Infrastructure {
  clock: () => number;
  logger: Logger;
  metrics: Metrics;
  /** Every store port, over DynamoDB (dynalite locally). */
  store: StorePorts;
  /** Where each call's record goes on its way to the warehouse: SQS, or the in-process queue. */
  recordQueue: RecordQueue;
  /** The warehouse's objects: Parquet files under `interactions/` (the bucket, or a folder). */
  warehouse: ObjectStore;
  /** Which records already became rows (the consumer's two-phase delivery). */
  deliveries: DeliveryLedger;
  /** Where messages that keep failing go: the dead-letter queue, or a folder of the warehouse. */
  deadLetters: DeadLetterSink;
  /** Exports' queries over the warehouse: Athena, or DuckDB. */
  warehouseQuery: WarehouseQuery & Partial<EncodedRowSource> & UsageGroupSource;
  /** Each project's bucket-export destination: DynamoDB, or a file. */
  exportSettings: ExportSettingsStore;
  /** The store behind a bucket-export destination: S3, or a folder. */
  openDestination(destination: ExportDestination): ObjectStore;
  /** What a deletion finds and rewrites: Athena and S3, or DuckDB and the folder. */
  deletionQuery: DeletionQuery;
  warehouseFiles: WarehouseFiles;
  /** Copies only this host keeps, purged by every deletion (Athena's results; local dead letters). */
  hostPurgers: CopyPurger[];
  /** The keyed user-id hash of level `none`: a generated secret, or derived from the master key file. */
  userIds: UserIdHasher;
  /** Where events go: the stack's EventBridge bus, or straight to the delivery queue. */
  events: EventPublisher;
  /** The projects' webhooks, their secrets under the host's key wrapper (KMS, the master key file). */
  webhooks: WebhookStore;
  /** Each delivery's attempts, for the dashboard and resends. */
  deliveryLog: DeliveryLog;
  /** Where webhook deliveries wait: SQS, or the in-process queue with its journal. */
  deliveryQueue: DeliveryQueue;
  /** Posts the signed webhook requests: to public addresses in AWS, to loopback too locally. */
  webhookSender: WebhookSender;
}
