/**
 * The service's own errors (DESIGN §7). Every error we produce is one of these, rendered by one
 * `onError` as `{"error":{"message","type","code"}}`. Vendor errors are passed through untouched and
 * never become an ApiError.
 */
export type ErrorType =
  | "invalid_request_error"
  | "authentication_error"
  | "billing_error"
  | "permission_error"
  | "not_found_error"
  | "method_not_allowed_error"
  | "idempotency_error"
  | "rate_limit_error"
  | "upstream_error"
  | "api_error";

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly type: ErrorType,
    readonly code: string,
    message: string,
    /** Extra response headers, e.g. Retry-After or Allow. */
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = "ApiError";
  }

  toBody(): ErrorBody {
    return { error: { message: this.message, type: this.type, code: this.code } };
  }
}

export interface ErrorBody {
  error: { message: string; type: string; code: string };
}

export const errors = {
  invalidJson: (detail?: string) =>
    new ApiError(
      400,
      "invalid_request_error",
      "invalid_json",
      `Request body is not valid JSON${detail ? `: ${detail}` : ""}.`,
    ),
  missingField: (field: string) =>
    new ApiError(400, "invalid_request_error", "missing_field", `Missing required field '${field}'.`),
  invalidField: (field: string, why: string) =>
    new ApiError(400, "invalid_request_error", "invalid_field", `Invalid field '${field}': ${why}`),
  invalidPath: (why: string) =>
    new ApiError(400, "invalid_request_error", "invalid_path", `Invalid request path: ${why}`),
  invalidHeader: (header: string, why: string) =>
    new ApiError(400, "invalid_request_error", "invalid_header", `Invalid header '${header}': ${why}`),
  missingApiKey: () =>
    new ApiError(
      401,
      "authentication_error",
      "missing_api_key",
      "No API key provided. Send 'Authorization: Bearer <API_KEY>'.",
    ),
  invalidApiKey: (why = "The API key is invalid.") =>
    new ApiError(401, "authentication_error", "invalid_api_key", why),
  insufficientCredits: (message = "Insufficient credits for this request.") =>
    new ApiError(402, "billing_error", "insufficient_credits", message),
  insufficientPermissions: (endpoint: string) =>
    new ApiError(
      403,
      "permission_error",
      "insufficient_permissions",
      `This API key is not allowed to call ${endpoint}.`,
    ),
  notFound: (what = "The requested endpoint does not exist.") =>
    new ApiError(404, "not_found_error", "not_found", what),
  modelNotFound: (model: string) =>
    new ApiError(404, "not_found_error", "model_not_found", `The model '${model}' is not available.`),
  methodNotAllowed: (method: string, allow: string[]) =>
    new ApiError(
      405,
      "method_not_allowed_error",
      "method_not_allowed",
      `Method ${method} is not allowed here; use ${allow.join(", ")}.`,
      { Allow: allow.join(", ") },
    ),
  payloadTooLarge: (limitBytes: number) =>
    new ApiError(
      413,
      "invalid_request_error",
      "payload_too_large",
      `Request body exceeds the limit of ${limitBytes} bytes.`,
      // The rest of the body is never read: the connection cannot carry another request.
      { Connection: "close" },
    ),
  headersTooLarge: () =>
    new ApiError(431, "invalid_request_error", "headers_too_large", "Request headers are too large."),
  tooManyConnections: (max: number) =>
    new ApiError(
      429,
      "rate_limit_error",
      "too_many_connections",
      `Too many open connections from this address (at most ${max}).`,
    ),
  browserCallRefused: () =>
    new ApiError(
      403,
      "permission_error",
      "cors_not_allowed",
      "Browser calls are not served: a service key in a web page can be read by anyone who loads it. Call the proxy from your backend.",
    ),
  requestTimeout: () =>
    new ApiError(408, "invalid_request_error", "request_timeout", "The request head did not arrive in time."),
  rateLimited: (retryAfterSeconds: number) =>
    new ApiError(
      429,
      "rate_limit_error",
      "rate_limit_exceeded",
      `Rate limit exceeded; retry after ${retryAfterSeconds} s.`,
      { "Retry-After": String(retryAfterSeconds) },
    ),
  upstreamUnreachable: (vendor: string) =>
    new ApiError(
      502,
      "upstream_error",
      "upstream_unreachable",
      `The ${vendor} upstream could not be reached.`,
    ),
  upstreamTimeout: (vendor: string) =>
    new ApiError(504, "upstream_error", "upstream_timeout", `The ${vendor} upstream did not answer in time.`),
  internal: () => new ApiError(500, "api_error", "internal_error", "An internal error occurred."),
  badRequest: (code: string, message: string) => new ApiError(400, "invalid_request_error", code, message),
  /** A Stripe route of a deployment without Stripe settings (docs/billing.md). */
  paymentsNotConfigured: () =>
    new ApiError(
      404,
      "not_found_error",
      "payments_not_configured",
      "Payments are not configured on this deployment: the operator sets a Stripe secret key and webhook secret (docs/billing.md).",
    ),
  /** A Stripe webhook whose signature or timestamp does not verify. */
  invalidSignature: (why: string) =>
    new ApiError(400, "invalid_request_error", "invalid_signature", `Invalid Stripe-Signature: ${why}`),
  /** The same payment is being applied by another delivery right now; the sender retries later. */
  paymentInProgress: () =>
    new ApiError(
      409,
      "idempotency_error",
      "payment_in_progress",
      "This payment is being applied by another delivery; retry after it has finished.",
    ),
  /** Stripe did not answer (network, timeout, its 5xx). */
  paymentProviderUnreachable: () =>
    new ApiError(
      502,
      "upstream_error",
      "payment_provider_unreachable",
      "Stripe could not be reached; try again.",
    ),
  /** Ends a streamed export whose query failed after the headers were sent (the last line of its body). */
  exportInterrupted: () =>
    new ApiError(
      500,
      "api_error",
      "export_interrupted",
      "The export failed while streaming: this file is incomplete. Request it again.",
    ),
  /** An export whose rows (the rollups' count for its range) could not stream within the limit. */
  exportTooLarge: (rows: number, maxRows: number, minutes: number) =>
    new ApiError(
      400,
      "invalid_request_error",
      "export_too_large",
      `This export would hold up to ${rows.toLocaleString("en-US")} rows (the project's calls in the range), more than the ${maxRows.toLocaleString("en-US")} a streamed export can send within its ${minutes}-minute limit. Export a shorter range, or set the project's bucket destination (dmt settings set --project <id> --export-bucket s3://<bucket>/<prefix>/) to have exports of any size written there.`,
    ),
  /** A dashboard download whose rows could not be prepared within the dashboard API's time. */
  downloadTooLarge: (rows: number, maxRows: number, streamedMaxRows: number) =>
    new ApiError(
      400,
      "invalid_request_error",
      "export_too_large",
      `This download would hold up to ${rows.toLocaleString("en-US")} rows (the project's calls in the range), more than the ${maxRows.toLocaleString("en-US")} the dashboard prepares at once. Download a shorter range, export with POST /api/v1/exports (streamed, up to ${streamedMaxRows.toLocaleString("en-US")} rows), or set the project's bucket destination (dmt settings set --project <id> --export-bucket s3://<bucket>/<prefix>/) to have exports of any size written there.`,
    ),
  /** Ends a streamed export that reached the streaming integration's time limit. */
  exportTimeLimit: (minutes: number) =>
    new ApiError(
      500,
      "api_error",
      "export_time_limit",
      `The export reached the ${minutes}-minute streaming limit: this file is incomplete. Export a shorter range, or set the project's bucket destination (dmt settings set --project <id> --export-bucket s3://<bucket>/<prefix>/) to have exports of any size written there.`,
    ),
};
