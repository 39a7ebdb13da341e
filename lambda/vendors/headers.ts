import { mentionsServiceKey } from "../core/keys";
import type { VendorDefinition } from "../core/vendor-model";

/**
 * Header hygiene. Only allowlisted headers cross the proxy, so service keys (`Authorization`,
 * `X-API-Key`, `x-goog-api-key`), cookies, hop-by-hop headers and `accept-encoding` never reach the
 * vendor (the vendor answers uncompressed, so usage can be read as the bytes pass), and the vendor's
 * cookies, account details and rate-limit headers (about our account, not the caller's) never reach
 * the client.
 */
const COMMON_REQUEST_HEADERS = ["content-type", "accept", "user-agent"];
/** The official SDKs' platform and retry headers. */
const REQUEST_HEADER_PREFIX = "x-stainless-";

const RESPONSE_HEADERS = new Set([
  "content-type",
  "content-encoding",
  "cache-control",
  // Vendor request ids: SDKs surface them in errors and support asks for them.
  "x-request-id",
  "request-id",
  "openai-processing-ms",
  "openai-version",
  // The SDKs' retry decisions.
  "retry-after",
  "retry-after-ms",
  "x-should-retry",
  // The simulator's mark on its answers.
  "x-dmt-simulated",
]);

export type RequestHeaderFilter = (
  incoming: Headers,
  vendorKey: string | undefined,
) => Record<string, string>;

/** The headers sent to a vendor: the allowlisted ones of the client, the vendor's defaults, its key. */
export function requestHeaderFilter(vendor: VendorDefinition): RequestHeaderFilter {
  const allowed = new Set([...COMMON_REQUEST_HEADERS, ...vendor.requestHeaders]);
  const defaults = Object.entries(vendor.defaultHeaders ?? {});
  return (incoming, vendorKey) => {
    const out: Record<string, string> = {};
    for (const [name, value] of incoming) {
      // A service key never leaves, under whatever allowlisted name a client put it.
      if (mentionsServiceKey(value)) continue;
      if (allowed.has(name) || name.startsWith(REQUEST_HEADER_PREFIX)) out[name] = value;
    }
    for (const [name, value] of defaults) out[name] ??= value;
    return vendorKey === undefined ? out : Object.assign(out, vendor.authHeaders(vendorKey));
  };
}

export type UpstreamHeaders = Record<string, string | string[] | undefined>;

/**
 * The vendor's response headers the client gets. `content-length` only when the body passes unchanged
 * (a stream we rewrite has another length).
 */
export function responseHeaders(upstream: UpstreamHeaders, bodyUnchanged: boolean): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name in upstream) {
    const value = upstream[name];
    if (value === undefined) continue;
    if (RESPONSE_HEADERS.has(name) || (bodyUnchanged && name === "content-length")) {
      out[name] = Array.isArray(value) ? value.join(", ") : value;
    }
  }
  return out;
}

/** One header of a vendor response, as a single string. */
export function headerValue(upstream: UpstreamHeaders, name: string): string | undefined {
  const value = upstream[name];
  return Array.isArray(value) ? value.join(", ") : value;
}
