/**
 * The DynamoDB tables, declared once: the local stack creates them in dynalite from this list and the
 * CDK store construct creates them in AWS from it, so the two cannot drift.
 */
export interface TableDefinition {
  partitionKey: string;
  sortKey?: { name: string; type: "S" | "N" };
  indexes?: {
    name: string;
    partitionKey: string;
    sortKey: { name: string; type: "S" | "N" };
    /** `keys`: the index holds the items' keys only, so writes that change nothing else skip it. */
    projection?: "keys";
  }[];
  /** Attribute DynamoDB may use to garbage-collect items in AWS; correctness never depends on it. */
  ttlAttribute?: string;
}

export type TableName =
  | "projects"
  | "keys"
  | "members"
  | "dashboardRequests"
  | "credits"
  | "ledger"
  | "payments"
  | "budgets"
  | "budgetCounters"
  | "rateLimits"
  | "idempotency"
  | "vendorKeys"
  | "warehouseDeliveries"
  | "warehouseLeases"
  | "projectSettings"
  | "interactions"
  | "usageRollups"
  | "deletionRequests"
  | "deletionTombstones"
  | "webhooks"
  | "webhookDeliveries"
  | "alertRules"
  | "plans"
  | "billingMeter";

export const TABLES: Record<TableName, TableDefinition> = {
  projects: { partitionKey: "projectId" },
  keys: {
    partitionKey: "keyId",
    indexes: [{ name: "byProject", partitionKey: "projectId", sortKey: { name: "createdAt", type: "N" } }],
  },
  /** Who belongs to which project: one item per (user, project), readable from either side. */
  members: {
    partitionKey: "userId",
    sortKey: { name: "projectId", type: "S" },
    indexes: [{ name: "byProject", partitionKey: "projectId", sortKey: { name: "userId", type: "S" } }],
  },
  /** Idempotency records of dashboard writes (Idempotency-Key), kept a day. */
  dashboardRequests: { partitionKey: "requestId", ttlAttribute: "expiresAt" },
  /**
   * One balance item per project, and an item per open hold (`<projectId>#hold#<holdId>`) with its
   * noted charges (adapters/dynamodb/credits.ts, hold-items.ts). `holdsDue` is sparse: only open holds
   * and balances the sweeper must look at are in it. A tombstone hold item goes with `gcAt`.
   */
  credits: {
    partitionKey: "projectId",
    indexes: [
      {
        name: "holdsDue",
        partitionKey: "holdOwner",
        sortKey: { name: "due", type: "N" },
        projection: "keys",
      },
    ],
    ttlAttribute: "gcAt",
  },
  /** Every credit movement, time-ordered per project; kept for good. */
  ledger: { partitionKey: "projectId", sortKey: { name: "entryId", type: "S" } },
  /**
   * Credits bought through Stripe (core/payments.ts): one item per payment (its PaymentIntent id) with
   * what it granted and what refunds and disputes took back, and a project's `#profile` (its Stripe
   * customer, recharge rule and state); each a lease-claimed item (adapters/dynamodb/payments.ts).
   */
  payments: { partitionKey: "projectId", sortKey: { name: "paymentId", type: "S" } },
  /** Budget definitions per project (core/budgets.ts); the budget id names its project. */
  budgets: { partitionKey: "projectId", sortKey: { name: "budgetId", type: "S" } },
  /**
   * One counter per budget and window, and per key and minute for tokens-per-minute limits, and an
   * item per open hold (adapters/dynamodb/budgets.ts, hold-items.ts), found through the sparse
   * `holdsDue`. A closed day or month window's counter expires 90 days after it closed, a past
   * minute's TPM counter an hour later (`gcAt`, core/budgets.ts `counterExpiry`).
   */
  budgetCounters: {
    partitionKey: "counterId",
    indexes: [
      {
        name: "holdsDue",
        partitionKey: "holdOwner",
        sortKey: { name: "due", type: "N" },
        projection: "keys",
      },
    ],
    ttlAttribute: "gcAt",
  },
  /** One token bucket per key; an item past `gcAt` says the same as no item. */
  rateLimits: { partitionKey: "bucketId", ttlAttribute: "gcAt" },
  /** X-Request-ID records and their stored responses; expiry is checked on read. */
  idempotency: { partitionKey: "recordId", ttlAttribute: "gcAt" },
  /** BYOK vendor keys, envelope-encrypted, one per project and vendor. */
  vendorKeys: { partitionKey: "projectId", sortKey: { name: "vendor", type: "S" } },
  /** Transaction ids the warehouse consumer already wrote (adapters/dynamodb/ledger.ts). */
  warehouseDeliveries: { partitionKey: "transactionId", ttlAttribute: "expiresAt" },
  /**
   * One lease per warehouse partition a compaction run holds, with the merge it has in progress
   * (adapters/dynamodb/partition-leases.ts); gone once released, reclaimed a day after it ends.
   */
  warehouseLeases: { partitionKey: "partition", ttlAttribute: "gcAt" },
  /** Per-project settings the operator sets with the CLI: the bucket-export destination (export-settings.ts). */
  projectSettings: { partitionKey: "projectId" },
  /**
   * The dashboard's recent-interactions index (adapters/dynamodb/interactions.ts): per project, packs of
   * up to 100 interactions of the same 10 seconds, their summaries under `p#<bucket>#<newest>#<pack id>`
   * and their whole records under `q#...`, gzipped, a pointer per interaction under
   * `t#<transaction id>`, and lists of the calls of a user, of the failed calls and of the BYOK or dual
   * calls (`u#<user>#<position>`, `x#<position>`, `b#<mode>#<position>`). Every filter is
   * applied while reading. The four indexes held the entries written before packs (`e#<position>`, one
   * per interaction, beside its record `r#<transaction id>`); nothing writes or reads them now, and they
   * are removed one per release once those entries are gone (97 days): CloudFormation deletes at most
   * one index of a table per update.
   */
  interactions: {
    partitionKey: "projectId",
    sortKey: { name: "sk", type: "S" },
    indexes: [
      { name: "byUser", partitionKey: "userKey", sortKey: { name: "sk", type: "S" } },
      { name: "byVendor", partitionKey: "vendorKey", sortKey: { name: "sk", type: "S" } },
      { name: "byStatus", partitionKey: "statusKey", sortKey: { name: "sk", type: "S" } },
      { name: "byBilling", partitionKey: "billingKey", sortKey: { name: "sk", type: "S" } },
    ],
    ttlAttribute: "gcAt",
  },
  /** Daily sums per project, day, vendor, billing mode and model (adapters/dynamodb/rollups.ts); kept for good. */
  usageRollups: { partitionKey: "projectId", sortKey: { name: "rollupId", type: "S" } },
  /**
   * Deletion requests, kept for good as the audit trail (reason, counts, user-id hash), and per-file
   * progress items `<requestId>#file#<hash>` (lambda/adapters/dynamodb/deletion-requests.ts). In AWS its stream
   * starts the deletion workflow (lib/deletion.ts). `byCreated` lists a project's requests newest
   * first (only request items carry `createdAt`, so file items stay out of it).
   */
  deletionRequests: {
    partitionKey: "projectId",
    sortKey: { name: "itemId", type: "S" },
    indexes: [{ name: "byCreated", partitionKey: "projectId", sortKey: { name: "createdAt", type: "N" } }],
  },
  /** What the warehouse consumer drops while a deletion runs; kept past the queue's retention. */
  deletionTombstones: {
    partitionKey: "projectId",
    sortKey: { name: "requestId", type: "S" },
    ttlAttribute: "expiresAt",
  },
  /** A project's webhooks, their secrets envelope-encrypted (adapters/dynamodb/events.ts). */
  webhooks: { partitionKey: "projectId", sortKey: { name: "webhookId", type: "S" } },
  /**
   * The delivery log: one item per event and webhook, updated at each attempt; dead deliveries stay
   * for a resend. Event ids sort by time, so a webhook's deliveries list newest first.
   */
  webhookDeliveries: {
    partitionKey: "webhookId",
    sortKey: { name: "eventId", type: "S" },
    ttlAttribute: "expiresAt",
  },
  /**
   * Alert rules per project (events/alerts.ts), armed until they fire; and under `<projectId>#crossed`
   * one item per budget window (its counter id) with the thresholds it crossed, kept past the window.
   */
  alertRules: { partitionKey: "projectId", sortKey: { name: "ruleId", type: "S" }, ttlAttribute: "gcAt" },
  /**
   * Price plans under `plan#<plan id>` with the projects on them, and each project's plan entries under
   * `project#<project id>` (adapters/dynamodb/plans.ts); kept for good.
   */
  plans: { partitionKey: "id" },
  /**
   * Billing exports (adapters/dynamodb/billing-meter.ts): per project its Stripe and OpenMeter
   * connections, its end users' Stripe customers and each call's meter event with its state, listed
   * per state by `byState`; an event expires 90 days after its call.
   */
  billingMeter: {
    partitionKey: "projectId",
    sortKey: { name: "sk", type: "S" },
    indexes: [{ name: "byState", partitionKey: "stateKey", sortKey: { name: "order", type: "S" } }],
    ttlAttribute: "expiresAt",
  },
};
export type TableNames = Record<TableName, string>;

/** Physical names: `DMT_TABLE_<NAME>` where set (CDK sets them), else `<prefix><name>`. */
export function tableNames(env: Record<string, string | undefined>, prefix = "dmt-"): TableNames {
  const names = {} as TableNames;
  for (const name of Object.keys(TABLES) as TableName[]) {
    names[name] = env[`DMT_TABLE_${name.toUpperCase()}`] ?? `${prefix}${name}`;
  }
  return names;
}
