import { createHash } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";

import type { VendorName } from "../../core/vendor-names";
import { UsageLedger } from "./usage-ledger";

export type { VendorName };

/** A simulated answer: sent whole (with a content length) or as chunks written one by one. */
export type Reply =
  | { status: number; headers: Record<string, string>; body: string | Buffer }
  | { status: number; headers: Record<string, string>; chunks: (string | Buffer)[] };

/** An error the vendor would answer with; each vendor renders it in its own shape. */
export class SimulatedError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly code: string | null = null,
  ) {
    super(message);
  }
}

export interface SimRequest {
  vendor: VendorName;
  method: string;
  /** The path below the vendor prefix, as the real vendor would see it under its base. */
  path: string;
  query: URLSearchParams;
  headers: IncomingHttpHeaders;
  body: Buffer;
  /** The vendor request id this answer carries (header, and Groq's `x_groq.id`). */
  requestId: string;
}

/** What a simulator keeps between requests (cleared by `reset()`). */
export class SimState {
  private counter = 0;
  /** Prompt prefixes seen before, for prompt-cache figures. Bounded: a benchmark must not grow it forever. */
  private readonly seenPrefixes = new Set<string>();
  /** Gemini cachedContents by name: their token count. */
  readonly cachedContents = new Map<string, { model: string; tokens: number }>();
  /** Tokens served per vendor, day and model, for the organization usage reports. */
  readonly usage = new UsageLedger();

  nextId(prefix: string): string {
    this.counter++;
    return `${prefix}sim${this.counter.toString(36).padStart(8, "0")}`;
  }

  /** True when this prefix was seen before; remembers it otherwise. */
  seenBefore(prefix: string): boolean {
    const digest = createHash("sha1").update(prefix).digest("base64");
    if (this.seenPrefixes.has(digest)) return true;
    if (this.seenPrefixes.size >= 10_000) this.seenPrefixes.clear();
    this.seenPrefixes.add(digest);
    return false;
  }

  clear(): void {
    this.counter = 0;
    this.seenPrefixes.clear();
    this.cachedContents.clear();
    this.usage.clear();
  }
}

export function jsonReply(value: unknown, status = 200, contentType = "application/json"): Reply {
  return { status, headers: { "content-type": contentType }, body: JSON.stringify(value) };
}

export function textReply(text: string, contentType = "text/plain; charset=utf-8"): Reply {
  return { status: 200, headers: { "content-type": contentType }, body: text };
}

export const SSE_HEADERS = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache",
} as const;

/** `data:`-only server-sent events (OpenAI chat/completions, Gemini with alt=sse). */
export function dataEvent(value: unknown): string {
  return `data: ${JSON.stringify(value)}\n\n`;
}

/** Named server-sent events (Anthropic, OpenAI responses): the event name is the payload's `type`. */
export function namedEvent(value: { type: string } & Record<string, unknown>): string {
  return `event: ${value.type}\ndata: ${JSON.stringify(value)}\n\n`;
}

export function streamReply(chunks: string[], headers: Record<string, string> = SSE_HEADERS): Reply {
  return { status: 200, headers: { ...headers }, chunks };
}

/** The JSON object body of a request, or the vendor's 400. */
export function readJson(req: SimRequest): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(req.body.toString("utf8"));
  } catch {
    throw new SimulatedError(400, "We could not parse the JSON body of your request.", "invalid_json");
  }
  if (!value || typeof value !== "object" || Array.isArray(value)) {
    throw new SimulatedError(400, "The request body must be a JSON object.", "invalid_json");
  }
  return value as Record<string, unknown>;
}

export function requireString(body: Record<string, unknown>, field: string): string {
  const value = body[field];
  if (typeof value !== "string" || value === "") {
    throw new SimulatedError(400, `${field}: Field required`, "missing_field");
  }
  return value;
}

/** An optional positive integer limit (max_tokens and friends). */
export function optionalLimit(body: Record<string, unknown>, ...fields: string[]): number | undefined {
  for (const field of fields) {
    const value = body[field];
    if (value === undefined || value === null) continue;
    if (typeof value !== "number" || !Number.isInteger(value) || value < 1) {
      throw new SimulatedError(400, `${field} must be a positive integer.`, "invalid_value");
    }
    return value;
  }
  return undefined;
}

export function unixSeconds(): number {
  return Math.floor(Date.now() / 1000);
}
