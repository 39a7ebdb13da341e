import type { AlertRuleStore } from "./alert-rules";
import type { BudgetCounters } from "./budgets";
import type { CreditStore } from "./credits";
import type { CopyPurger, DeletionRequestStore, TombstoneStore } from "./deletion";
import type { IdempotencyStore } from "./idempotency";
import type { InteractionIndex } from "./interactions";
import type { MemberStore, RequestLog } from "./members";
import type { PaymentStore } from "./payments";
import type { PlanStore } from "./plans";
import type { ProjectTiers, Store } from "./ports";
import type { PrivacySettingsStore } from "./privacy";
import type { RateLimiter } from "./rate-limit";
import type { RetentionIndex } from "./retention";
import type { UsageRollups } from "./usage-rollups";
import type { VendorKeyStore } from "./vendor-keys";

/**
 * Every store port a deployable may take, one per concern: what `Infrastructure.store` holds. DynamoDB
 * implements them all (adapters/dynamodb/ports.ts), in AWS and over dynalite locally.
 */
export interface StorePorts {
  /** Projects and service keys. */
  keys: Store;
  credits: CreditStore;
  /** Credits bought through Stripe: payments, refunds, and each project's recharge profile. */
  payments: PaymentStore;
  /** Budget definitions and their windows' counters. */
  budgets: BudgetCounters;
  rateLimiter: RateLimiter;
  idempotency: IdempotencyStore;
  /** Customers' own vendor keys (BYOK), wrapped by the host's key wrapper. */
  vendorKeys: VendorKeyStore;
  /** Memberships, and the dashboard's request log (its writes' idempotency). */
  members: MemberStore & RequestLog;
  projectTiers: ProjectTiers;
  privacy: PrivacySettingsStore;
  /**
   * The dashboard's interactions index with its rollups: written by the warehouse consumer, expired by
   * retention, purged by deletions.
   */
  interactions: InteractionIndex & RetentionIndex & CopyPurger & { readonly rollups: UsageRollups };
  deletionRequests: DeletionRequestStore;
  tombstones: TombstoneStore;
  alertRules: AlertRuleStore;
  /** Price plans and which project is on which (core/plans.ts). */
  plans: PlanStore;
}
