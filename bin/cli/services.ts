import { resolve } from "node:path";
import type { DynamoBudgets } from "../../lambda/adapters/dynamodb/budgets";
import type { DynamoPrivacySettings } from "../../lambda/adapters/dynamodb/privacy-settings";
import type { MeterQueue, MeterStore } from "../../lambda/core/billing-meter";
import type { CompactionReport } from "../../lambda/core/compaction";
import type { CreditStore } from "../../lambda/core/credits";
import { errors } from "../../lambda/core/errors";
import type { MemberStore, UserDirectory } from "../../lambda/core/members";
import { type PaymentStore, parseAmounts } from "../../lambda/core/payments";
import type { PlanStore } from "../../lambda/core/plans";
import type { Store } from "../../lambda/core/ports";
import type { RetentionAudit } from "../../lambda/core/retention";
import type { UsageRollups } from "../../lambda/core/usage-rollups";
import type { VendorKeyStore } from "../../lambda/core/vendor-keys";
import { DEFAULT_DATA_DIR, type LocalConfig } from "../../lambda/local/config";
import type { CompactionOptions } from "../../lambda/warehouse/compaction";
import type { RetentionOptions } from "../../lambda/warehouse/retention";
import type { CliEvents } from "../cli-events-open";

/** What commands work with, opened on first use. */
export interface Services {
  store: Store;
  credits: CreditStore;
  vendorKeys: VendorKeyStore;
  budgets: DynamoBudgets;
  /**
   * The daily rollups: what the dashboard's Usage page and `dmt usage` read, and where a budget set
   * mid-window starts from what its scope spent in it already.
   */
  usage: UsageRollups;
  /** A file in the data dir locally; the `projectSettings` table in AWS (s3:// destinations only). */
  exportSettings: { setExportDestination(projectId: string, url: string | undefined): Promise<void> };
  members: MemberStore;
  /** The dashboard's users by email: the local provider's, or the stack's Cognito user pool. */
  users: UserDirectory;
  /** Price plans and which project is on which (the `plans` table). */
  plans: PlanStore;
  /** Payments and each project's billing profile: its auto-recharge rule (the `payments` table). */
  payments: PaymentStore;
  /**
   * The amounts Buy credits offers, in micros: `DMT_STRIPE_AMOUNTS_USD` locally, the stack's
   * `StripeAmountsUsd` output in AWS (context `dmt:stripeAmountsUsd`); default 10, 25 and 100 dollars.
   */
  offeredAmountsMicros(): number[];
  /** What records keep and for how long: attributes of the project and key items. */
  privacy: DynamoPrivacySettings;
  /** The retention run over the local data dir (in AWS a scheduled function runs it). */
  retention(options: RetentionOptions): Promise<RetentionAudit>;
  /** The compaction run over the local data dir (in AWS a scheduled function runs it). */
  compaction(options: CompactionOptions): Promise<CompactionReport>;
  /** The project, or a not-found error naming it. */
  project(projectId: string): Promise<string>;
  /** Alert rules, webhooks and the events commands publish, opened on first use. */
  events(): Promise<CliEvents>;
  /** The billing exports' connections and events, and the meter queue a resend goes to. */
  billing(): Promise<{ store: MeterStore; queue: MeterQueue }>;
}

/** Whether the data dir is another than the default, so that commands must name it. */
export const otherDataDir = (dataDir: string) => dataDir !== resolve(DEFAULT_DATA_DIR);

/**
 * The services of the local data dir, or of a deployed stack when `stackName` is set. The store's
 * adapters and the AWS clients are loaded only when a command opens them, not at every start.
 */
export function servicesOpener(
  stackName: string | undefined,
  config: LocalConfig,
): { open(): Promise<Services>; close(): Promise<void> } {
  let opening: Promise<{ services: Services; close(): Promise<void> }> | undefined;
  return {
    async open() {
      opening ??= openServices(stackName, config);
      return (await opening).services;
    },
    async close() {
      // A command that failed to open has nothing to close.
      const opened = await opening?.catch(() => undefined);
      await opened?.close();
    },
  };
}

async function openServices(stackName: string | undefined, config: LocalConfig) {
  let parts: Omit<Services, "project" | "events" | "billing" | "offeredAmountsMicros">;
  // The same list and default as the server's (lambda/local/config.ts) and the stack's.
  let amountsUsd = config.DMT_STRIPE_AMOUNTS_USD;
  let openBilling: () => Promise<{ store: MeterStore; queue: MeterQueue; close(): Promise<void> }>;
  let closeStore: () => unknown;
  let openEvents: () => Promise<CliEvents & { close(): Promise<void> }>;
  if (stackName !== undefined) {
    // Loaded only here: the CloudFormation and KMS clients would slow every local command's start.
    const { awsEvents, awsServices, openAwsTarget } = await import("../aws-target");
    const target = await openAwsTarget(stackName);
    closeStore = () => target.close();
    parts = awsServices(target);
    amountsUsd = target.stripeAmountsUsd ?? "10,25,100";
    openEvents = async () => awsEvents(target);
    openBilling = async () => (await import("../aws-target")).awsBilling(target);
  } else {
    // Told to a person at a terminal, on stderr: output read by scripts stays as it was.
    if (otherDataDir(config.dataDir) && process.stderr.isTTY) {
      process.stderr.write(`dmt: data dir ${config.dataDir}\n`);
    }
    const { openLocalTarget } = await import("../local-target");
    const target = await openLocalTarget(config.dataDir, config.DMT_DYNAMODB_ENDPOINT);
    closeStore = () => target.close();
    parts = target.services;
    const credits = target.services.credits;
    openEvents = async () =>
      (await import("../cli-events-open")).localEvents(target.db, target.tables, credits, config.dataDir);
    openBilling = () => target.billing();
  }
  let events: Promise<CliEvents & { close(): Promise<void> }> | undefined;
  let billing: ReturnType<typeof openBilling> | undefined;
  const { store } = parts;
  const services: Services = {
    ...parts,
    offeredAmountsMicros: () => parseAmounts(amountsUsd),
    events: () => {
      events ??= openEvents();
      return events;
    },
    billing: () => {
      billing ??= openBilling();
      return billing;
    },
    async project(projectId) {
      if (!(await store.getProject(projectId)))
        throw errors.notFound(`Project '${projectId}' does not exist.`);
      return projectId;
    },
  };
  return {
    services,
    async close() {
      await (await events?.catch(() => undefined))?.close();
      await (await billing?.catch(() => undefined))?.close();
      await closeStore();
    },
  };
}
