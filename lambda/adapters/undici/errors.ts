import { type ApiError, errors } from "../../core/errors";

/**
 * The one place that tells upstream failures apart. A vendor's HTTP error is not a failure here: it is a
 * response and passes through. What is left: the vendor did not answer in time (connect, first byte or
 * an idle gap: 504 `upstream_timeout`), could not be reached or dropped the connection (502
 * `upstream_unreachable`), or our own client went away (nothing to answer).
 */
export type UpstreamFailureKind = "timeout" | "unreachable" | "client_aborted";

const TIMEOUT_CODES = new Set(["UND_ERR_CONNECT_TIMEOUT", "UND_ERR_HEADERS_TIMEOUT", "UND_ERR_BODY_TIMEOUT"]);
const SYSTEM_ERROR = /^E[A-Z0-9_]+$/;

/**
 * The kind of a failure thrown by the upstream client, or undefined when the error is not about the
 * upstream at all (a bug of ours, to surface as such). `clientGone`: the caller's request was aborted.
 */
export function upstreamFailureKind(err: unknown, clientGone: boolean): UpstreamFailureKind | undefined {
  if (clientGone) return "client_aborted";
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code !== "string") return undefined;
  if (TIMEOUT_CODES.has(code) || code === "ETIMEDOUT") return "timeout";
  // undici's own errors (socket closed, reset, parser errors) and system errors (ECONNREFUSED, ENOTFOUND...).
  if (code.startsWith("UND_ERR_") || SYSTEM_ERROR.test(code)) return "unreachable";
  return undefined;
}

/** The error the client gets for a failure before the vendor's first byte. */
export function upstreamFailureError(kind: "timeout" | "unreachable", vendor: string): ApiError {
  return kind === "timeout" ? errors.upstreamTimeout(vendor) : errors.upstreamUnreachable(vendor);
}
