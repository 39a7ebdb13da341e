import type { Usage } from "./usage";

import type { VendorName } from "./vendor-names";

export { VENDOR_NAMES, type VendorName } from "./vendor-names";

/** What a route does, as the usage extractors and the records name it. */
export type Operation =
  | "health"
  | "models"
  | "chat"
  | "completions"
  | "responses"
  | "embeddings"
  | "transcription"
  | "translation"
  | "speech"
  | "image"
  | "moderation"
  | "messages"
  | "complete"
  | "count_tokens"
  | "generate"
  | "embed"
  | "cached_content";

/**
 * The request body a route takes: `json` (validated before forwarding), `multipart` (an upload, needs a
 * boundary), `binary-response` (a JSON request answered with bytes, e.g. speech), `none` (GET).
 */
export type RouteKind = "json" | "multipart" | "binary-response" | "none";

/** How a call asks for a stream: never, by `"stream": true` in its JSON body, or always (the route itself). */
export type StreamDetection = "never" | "body-flag" | "always";

export interface VendorRoute {
  method: "GET" | "POST";
  /** Path under the vendor prefix; `{model}` stands for one validated model segment. */
  path: string;
  /** Path on the vendor, when it differs from `path` (same placeholders). */
  upstreamPath?: string;
  operation: Operation;
  kind: RouteKind;
  stream: StreamDetection;
  /** Largest request body accepted, in bytes (413 above it). */
  bodyLimit: number;
  billing: "free" | "billable";
  /** A stream whose usage the vendor reports only when asked: how to ask, and what to hide again. */
  streamUsage?: StreamUsageRequest;
  /** Where this route's stream events report usage: the last such event can carry the call's cost. */
  usageInEvent?: UsageInEvent;
  /**
   * The model the vendor runs when the call names none, from the fields the call does send (its JSON
   * body's members or its form's text fields): the model the allowlist, the price and the record take.
   */
  defaultModel?: (field: (name: string) => unknown) => string;
  /**
   * An upload whose answer, in the format the client asked, would not report the usage the vendor bills
   * (a transcript as plain text or subtitles): the format to ask the vendor for instead, and how to
   * turn its answer back into the asked one.
   */
  usageFormat?: (form: Map<string, string>) => UsageFormat | undefined;
  /**
   * Refuses a request the proxy cannot meter (throws an `ApiError`) before anything is forwarded, from
   * the fields it sends (its JSON body's members or its form's text fields).
   */
  check?: (field: (name: string) => unknown) => void;
}

/** A form field asked in another value so that the answer reports usage, and the answer rendered back. */
export interface UsageFormat {
  field: string;
  /** The value the vendor is sent instead of the client's. */
  upstreamValue: string;
  /** The answer the client asked for, from the vendor's JSON answer; undefined when it cannot be read. */
  render(answer: Record<string, unknown>): { contentType: string; body: string } | undefined;
}

/**
 * The usage object one stream event reports (the event's parsed JSON, and its SSE `event:` name),
 * or undefined when it reports none. With `X-DMT-Include-Cost: 1` the proxy adds `dmt_cost_usd` to
 * it in the last event that has one.
 */
export type UsageInEvent = (
  event: Record<string, unknown>,
  name: string | undefined,
) => Record<string, unknown> | undefined;

/**
 * Usage a vendor puts in a stream only when the request asks for it (OpenAI's
 * `stream_options.include_usage`). The proxy asks on the client's behalf, so that every stream is
 * metered, and hides what the asking added, so that the client gets the stream it would have got.
 */
export interface StreamUsageRequest {
  /** The request body asking for usage; undefined when the client asked itself (then nothing is hidden). */
  ask(body: Uint8Array, json: Record<string, unknown>): Uint8Array | undefined;
  /** One SSE event the asking added (by its data): dropped whole. */
  added(data: string): boolean;
  /** One SSE event's text (its lines and blank line) without what the asking added to it. */
  withoutAdded(block: string): string;
}

/** One call's request as the usage extractors see it. */
export interface UsageContext {
  operation: Operation;
  /** The parsed JSON request body, when the route takes JSON. */
  request: Record<string, unknown> | undefined;
}

/** Usage and the assembled final message of one stream, fed event by event as the stream passes. */
export interface StreamObserver {
  /** One SSE event's data (and its `event:` name), or one element of a streamed JSON array. */
  event(data: string, name: string | undefined): void;
  /**
   * The figures so far; `complete` is false when the stream ended early. `text` is what the client
   * received as text (content, thinking, tool-call arguments), without the wire format around it: what
   * an abandoned stream's output is estimated from.
   */
  result(complete: boolean): { usage: Usage; message: unknown; text: string };
}

/** Pure usage extraction for one vendor's wire formats. */
export interface UsageExtractor {
  /** Usage of a complete successful response (`body` is undefined for binary responses). */
  fromResponse(context: UsageContext, body: unknown): Usage;
  /** A fresh observer for one streamed response. */
  stream(context: UsageContext): StreamObserver;
}

/** Everything that makes a vendor: one folder under `lambda/vendors/`, one value of this type. */
export interface VendorDefinition {
  name: VendorName;
  /** Origin plus base path of the real vendor (DESIGN §2). */
  defaultUpstream: string;
  routes: readonly VendorRoute[];
  /** The headers that carry the vendor key. */
  authHeaders(vendorKey: string): Record<string, string>;
  /** Request headers forwarded for this vendor, on top of the common allowlist (lower case). */
  requestHeaders: readonly string[];
  /** Headers the vendor requires, sent when the client did not send them. */
  defaultHeaders?: Readonly<Record<string, string>>;
  /** Rejects query parameters the proxy cannot relay faithfully (throws ApiError 400). */
  checkQuery?(query: URLSearchParams): void;
  usage: UsageExtractor;
}
