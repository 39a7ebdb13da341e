import { createHash } from "node:crypto";
import { ApiError, errors } from "./errors";

/**
 * Idempotency by `X-Request-ID`, per key, for 24 hours: a retry of a completed call replays its stored
 * response instead of calling the vendor again; a retry while the first is in flight gets 409; the same
 * id with another request gets 422. Calls without the header are never deduplicated.
 */

export const REQUEST_ID_HEADER = "X-Request-ID";
/** Marks a replayed response. */
export const REPLAY_HEADER = "Idempotent-Replayed";
export const IDEMPOTENCY_WINDOW_MS = 24 * 60 * 60 * 1000;
/** How long a call may stay in flight before a retry may take it over (a dead process's record). */
export const IDEMPOTENCY_LEASE_MS = 15 * 60 * 1000;
/** Responses up to this size are stored and replayed; a larger one is remembered as not replayable. */
export const MAX_REPLAY_BYTES = 4 * 1024 * 1024;
const MAX_REQUEST_ID = 200;

/** The response of a completed call, as sent: a non-stream body is one chunk. */
export interface StoredResponse {
  status: number;
  headers: [string, string][];
  chunks: Uint8Array[];
}

export type BeginOutcome =
  /** This call runs; pass the token to `complete` or `abandon`. */
  | { kind: "new"; token: string }
  | { kind: "in_progress" }
  | { kind: "mismatch" }
  /** `response` is absent when the first call's response was too large to store. */
  | { kind: "completed"; response?: StoredResponse };

/** The idempotency port. `keyId` scopes request ids: two keys never see each other's records. */
export interface IdempotencyStore {
  begin(keyId: string, requestId: string, fingerprint: string): Promise<BeginOutcome>;
  /** Stores the response; false when the record was taken over meanwhile (the lease ran out). */
  complete(keyId: string, requestId: string, token: string, response: StoredResponse): Promise<boolean>;
  /** Forgets a call that produced nothing worth replaying, so a retry runs again. */
  abandon(keyId: string, requestId: string, token: string): Promise<void>;
}

/** The header's value, or a 400 naming what is wrong. */
export function validateRequestId(value: string): string {
  if (value.length === 0 || value.length > MAX_REQUEST_ID) {
    throw errors.invalidHeader(REQUEST_ID_HEADER, `must be 1 to ${MAX_REQUEST_ID} characters long`);
  }
  if (!/^[\x21-\x7e]+$/.test(value)) {
    throw errors.invalidHeader(
      REQUEST_ID_HEADER,
      "must be printable ASCII without spaces or control characters",
    );
  }
  return value;
}

/** What makes two requests "the same": method, target and body bytes (the JSON head keeps them apart). */
export function requestFingerprint(method: string, target: string, body: Uint8Array): string {
  return createHash("sha256")
    .update(`${JSON.stringify([method, target])}\n`)
    .update(body)
    .digest("hex");
}

/** The error for an outcome that is neither a new call nor a replay. */
export function idempotencyError(outcome: Exclude<BeginOutcome, { kind: "new" }>): ApiError {
  switch (outcome.kind) {
    case "in_progress":
      return new ApiError(
        409,
        "idempotency_error",
        "request_in_progress",
        `A request with this ${REQUEST_ID_HEADER} is still in progress; retry after it has finished.`,
      );
    case "mismatch":
      return new ApiError(
        422,
        "idempotency_error",
        "request_id_reused",
        `This ${REQUEST_ID_HEADER} was already used for a different request (method, path or body); ` +
          "use a new id for a new request.",
      );
    case "completed":
      return new ApiError(
        409,
        "idempotency_error",
        "response_not_replayable",
        `The request with this ${REQUEST_ID_HEADER} has completed, but its response was larger than ` +
          `${MAX_REPLAY_BYTES} bytes and cannot be replayed; use a new id to call again.`,
      );
  }
}
