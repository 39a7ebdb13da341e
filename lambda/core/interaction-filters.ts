/**
 * The Interactions list's vocabulary, shared by the API that parses a listing (interactions.ts) and the
 * dashboard page that asks for one (web/src/pages/interactions.ts). The dashboard's bundle imports this
 * file, so it imports nothing.
 */

/** The index holds this many days (up to today, UTC); older interactions are in the warehouse only. */
export const INDEX_RETENTION_DAYS = 90;

/** The list's filters: the URL parameters of `GET .../interactions`, and of the dashboard's page. */
export const LIST_FILTERS = [
  "from",
  "to",
  "vendor",
  "model",
  "key_id",
  "user_id",
  "status",
  "billing_mode",
] as const;
export type ListFilter = (typeof LIST_FILTERS)[number];

/** The outcome classes the status filter takes besides one exact status code. */
export const STATUS_CLASSES = ["success", "error"] as const;
export type StatusClass = (typeof STATUS_CLASSES)[number];

/** The refusals dmt makes itself, before any vendor is called, by kind. */
export const REFUSAL_KIND_NAMES = ["credits", "budget", "rate", "policy"] as const;
export type RefusalKind = (typeof REFUSAL_KIND_NAMES)[number];

/**
 * What each refusal kind of the status filter selects: the status and the error codes dmt answers that
 * refusal with. 402 alone would mix running out of credits with a budget's limit.
 */
export const REFUSAL_KINDS: Record<RefusalKind, { status: number; codes: readonly string[] }> = {
  credits: { status: 402, codes: ["insufficient_credits"] },
  budget: { status: 402, codes: ["budget_exceeded"] },
  rate: { status: 429, codes: ["rate_limit_exceeded"] },
  policy: { status: 403, codes: ["insufficient_permissions", "model_not_allowed"] },
};
