/** The shapes the dashboard API answers and takes, as the pages read them (calls: api.ts). */
import type { MemberView } from "../../lambda/app/dashboard/members";
import type { BillingMode } from "../../lambda/core/billing-mode";
import type { BudgetInput as CoreBudgetInput } from "../../lambda/core/budgets";
import type { ListFilter } from "../../lambda/core/interaction-filters";
import type { UsageSeries } from "../../lambda/core/interactions-usage";
import type { Role } from "../../lambda/core/members";
import type { VendorName } from "../../lambda/core/vendor-names";

export interface KeyView {
  keyId: string;
  projectId: string;
  name: string;
  prefix: string;
  status: "active" | "revoked" | "expired";
  createdAt: number;
  lastUsedAt?: number;
  expiresAt?: number;
  revokedAt?: number;
  allow?: string[];
  models?: string[];
  tpm?: number;
}

/** A budget as the dashboard API shows it (lambda/core/budgets.ts BudgetView). */
export interface BudgetView {
  id: string;
  scope: "project" | "key" | "user";
  key?: string;
  user?: string;
  window: "day" | "month" | "total";
  limit_usd: string;
  soft: boolean;
  include_byok: boolean;
  spent_usd?: string;
  held_usd?: string;
  resets_at?: string;
}

/** A budget as the page sends it: the project is in the path. */
export type BudgetInput = Omit<CoreBudgetInput, "projectId">;

export interface MemberProject {
  projectId: string;
  tier: string;
  role: Role;
  personal: boolean;
}

/** A member of a project as the Members page lists it (lambda/app/dashboard/members.ts). */
export type { MemberView };

export interface Me {
  user: { id: string; operator: boolean };
  projects: MemberProject[];
}

export interface NewKeyInput {
  name: string;
  allow?: string[];
  expiresAt?: number;
  /** Comma-separated model names or globs. */
  models?: string;
  tpm?: number;
}

export interface CreatedKey {
  /** The full key: present only in the response that created it. */
  key?: string;
  apiKey: KeyView;
  /** The same request (Idempotency-Key) was answered before. */
  replayed?: boolean;
}

export interface CreditBalance {
  availableMicros: number;
  heldMicros: number;
  chargedInFlightMicros: number;
  openHolds: number;
}

export type { BreakdownDimension, BreakdownLine, BreakdownReport } from "../../lambda/core/breakdowns";
export type { Overview, PeriodSpend } from "../../lambda/core/overview";
export type { PlanSummary, ProjectPlanView } from "../../lambda/core/plans";
// The statement and the overview are computed in lambda/core; the page reads the same shapes.
export type { Statement, StatementLine } from "../../lambda/core/statement";

export interface CreditPurchaseOffer {
  configured: boolean;
  amounts_usd: string[];
  saved_card?: boolean;
  recharge?: RechargeRule | null;
  last_recharge?: {
    at: number;
    outcome: "succeeded" | "failed" | "unreachable";
    message?: string;
  } | null;
}

/** An auto-recharge rule as the API reads and writes it: dollars as decimal strings. */
export interface RechargeRule {
  threshold_usd: string;
  amount_usd: string;
}

export interface GrantInput {
  usd: string;
  source: string;
  note?: string;
}

export type Vendor = VendorName;
export type { UsageSeries };

export interface VendorKeyView {
  vendor: Vendor;
  last4: string;
  createdAt: number;
  updatedAt: number;
}

export type { BillingMode };

/** One row of the Interactions list: the record's fields without bodies (snake_case, as in exports). */
export interface InteractionSummary {
  transaction_id: string;
  started_at: number;
  vendor: Vendor;
  endpoint: string;
  model: string | null;
  billing_mode: BillingMode;
  status_code: number;
  error_type: string | null;
  error_code: string | null;
  user_id: string | null;
  key_id: string;
  streamed: boolean;
  latency_ms: number;
  ttft_ms: number | null;
  input_tokens: number;
  output_tokens: number;
  cached_input_tokens: number;
  reasoning_tokens: number;
  cost_micros: number | null;
  usage_estimated: boolean;
  usage_complete: boolean;
}

/** The whole interaction record, bodies included. */
export interface Interaction extends InteractionSummary {
  request_id: string | null;
  project_id: string;
  vendor_request_id: string | null;
  cache_write_tokens: number;
  images: number | null;
  audio_seconds: number | null;
  speech_characters: number | null;
  price_version: string | null;
  service_tier: string | null;
  /** JSON: usage beyond the token columns, and vendor fields nothing prices (`unpriced`). */
  usage_details: string | null;
  /** JSON: the line items that give `cost_micros` (see `CostBreakdownView`). */
  cost_breakdown: string | null;
  request_body: string | null;
  response_body: string | null;
  truncated: boolean;
  request_bytes: number;
  response_bytes: number;
  user_agent: string | null;
  /** What the record keeps (docs/privacy.md); null on records written before levels existed. */
  store_level: "full" | "metadata" | "none" | null;
}

/**
 * The list filters as URL parameters (`from`, `to`, `vendor`, `model` (part of a name), `key_id`,
 * `user_id`, `status`, `billing_mode`).
 */
export type InteractionFilters = Partial<Record<ListFilter, string>>;

export interface InteractionPage {
  interactions: InteractionSummary[];
  cursor?: string;
}

export interface UsageCounters {
  requests: number;
  errors: number;
  /** Of the errors, the calls dmt refused itself. */
  refused: number;
  input_tokens: number;
  output_tokens: number;
  cached_input_tokens: number;
  cost_micros: number;
  unpriced: number;
  latency_ms: number;
}

export interface UsageReport {
  from: string;
  to: string;
  days: string[];
  series: UsageSeries[];
  totals: Record<BillingMode, UsageCounters>;
}

export interface ExportInput {
  format: "json" | "csv";
  range: { start: string; end: string };
  filters?: Record<string, string | number>;
}

export type DeletionStatus = "queued" | "running" | "completed" | "failed";

/** A deletion request as Settings lists it: the user only as the hash of its id. */
export interface DeletionRequestView {
  requestId: string;
  status: DeletionStatus;
  reason: string;
  userIdHash?: string;
  transactionIdCount: number;
  counts: { rowsDeleted: number; filesRewritten: number; filesDeleted: number; copiesPurged: number };
  createdAt: number;
  startedAt?: number;
  finishedAt?: number;
  error?: string;
}

export interface DeletionRequestPage {
  requests: DeletionRequestView[];
  cursor?: string;
}

/** The body of `POST /api/v1/data`: a user, transactions, or both. */
export interface DeletionInput {
  reason: string;
  user_id?: string;
  transaction_ids?: string[];
}

export type StoreLevel = "full" | "metadata" | "none";

/** A project's privacy settings (docs/privacy.md); null days: kept until deleted. */
export interface PrivacyView {
  store: StoreLevel;
  retentionDays: number | null;
  bodyRetentionDays: number | null;
}

/** An alert rule (lambda/events/alerts.ts). */
export type AlertRuleView =
  | { ruleId: "low-balance"; kind: "low_balance"; thresholdMicros: number; armed: boolean; firedAt?: number }
  | { ruleId: "budget-thresholds"; kind: "budget_thresholds"; thresholds: number[] };

export interface WebhookView {
  webhookId: string;
  url: string;
  events: string[];
  createdAt: number;
}

/** One event's delivery to one webhook, as the delivery log keeps it. */
export interface DeliveryView {
  eventId: string;
  eventType: string;
  status: "pending" | "retrying" | "delivered" | "dead";
  attempts: number;
  lastStatusCode?: number;
  lastError?: string;
  lastAttemptAt?: number;
  nextRetryAt?: number;
}
