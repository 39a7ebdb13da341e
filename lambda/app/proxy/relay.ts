import { upstreamFailureKind } from "../../adapters/undici/errors";
import type { RelayResult } from "../../core/call";
import { type CapturedBody, captureMetadata, captureText, captureValue } from "../../core/capture";
import type { StoredResponse } from "../../core/idempotency";
import type { UpstreamResponse } from "../../core/upstream";
import { emptyUsage, type Usage } from "../../core/usage";
import type {
  StreamObserver,
  StreamUsageRequest,
  UsageContext,
  UsageExtractor,
  UsageFormat,
  UsageInEvent,
  VendorRoute,
} from "../../core/vendor-model";
import { headerValue, responseHeaders } from "../../vendors/headers";
import { asObject, type JsonObject, parseJson } from "../../vendors/json";
import { JsonArrayReader } from "../../vendors/json-array";
import { parseSseEvent, SseReader, withEventData } from "../../vendors/sse";
import { securedResponse } from "../security-headers";

export interface RelayOptions {
  route: VendorRoute;
  usage: UsageExtractor;
  usageContext: UsageContext;
  /** Usage was asked for on the client's behalf: hide what the asking added (the route's `streamUsage`). */
  stripUsage: boolean;
  captureLimit: number;
  /** `performance.now()` when the call arrived. */
  arrived: number;
  /** Headers to add to the response (rate-limit headers and the like). */
  extraHeaders: Record<string, string>;
  /** Keep the bytes sent, up to about this many, for `RelayResult.sent`. */
  keepBytes?: number;
  /** Headers that depend on a whole answer's usage (its cost), for answers sent whole. */
  answerHeaders?(usage: Usage): Record<string, string>;
  /**
   * The client asked for the cost in the stream (`X-DMT-Include-Cost: 1`): a stream's cost, as
   * `dmt_cost_usd` says it, from its final usage; undefined when unpriced.
   */
  streamCost?(usage: Usage): string | undefined;
  /** The answer was asked in another format for its usage: the client's from it (a route's `usageFormat`). */
  render?: UsageFormat["render"];
  /** Called once, when the response ended (or broke, or the client left). */
  done(result: () => RelayResult): void;
}

const NULL_BODY_STATUSES = new Set([101, 204, 205, 304]);
const encoder = new TextEncoder();

/**
 * Turns a vendor response into the client's response. Waits for the first body chunk (so a vendor that
 * answers headers and then nothing is still a 504), then:
 * - streams (SSE, Gemini's JSON array) and binary bodies are forwarded chunk by chunk as they arrive,
 *   with usage read from each chunk after it was handed on (when the client asked for the cost in the
 *   stream, the last event with usage waits for the end, see `costInLastUsage`);
 * - other bodies (JSON answers, vendor errors) are small and complete at once: sent whole, read after.
 * Throws what the upstream client threw when the body fails before its first byte.
 */
export async function relayResponse(upstream: UpstreamResponse, options: RelayOptions): Promise<Response> {
  const { status } = upstream;
  const contentType = headerValue(upstream.headers, "content-type");
  const ok = status >= 200 && status < 300;
  const vendorRequestId =
    headerValue(upstream.headers, "x-request-id") ?? headerValue(upstream.headers, "request-id");
  const iterator = upstream.body[Symbol.asyncIterator]();
  let first: IteratorResult<Uint8Array>;
  try {
    first = await iterator.next();
  } catch (err) {
    upstream.body.destroy();
    throw err;
  }

  const sse = ok && (contentType ?? "").startsWith("text/event-stream");
  const streamed =
    sse || (ok && options.route.stream === "always") || (ok && options.route.kind === "binary-response");
  if (!streamed) {
    const answer = first.done ? Buffer.alloc(0) : await readRest(first.value, iterator);
    const ttftMs = performance.now() - options.arrived;
    // Parsed once, for the usage and for the client's format.
    let parsed: { json: unknown } | undefined;
    const answerJson = () => {
      parsed ??= { json: parseJson(answer.toString()) };
      return parsed.json;
    };
    // Read now only when a header needs it; otherwise after the answer is sent.
    let usage: Usage | undefined;
    const usageOf = () => {
      usage ??= ok ? options.usage.fromResponse(options.usageContext, answerJson()) : emptyUsage();
      return usage;
    };
    const rendered = ok && options.render ? renderedAnswer(answerJson(), options.render) : undefined;
    const body = rendered?.body ?? answer;
    const vendorHeaders = responseHeaders(upstream.headers, rendered === undefined);
    if (rendered) vendorHeaders["content-type"] = rendered.contentType;
    const answered = options.answerHeaders?.(usageOf());
    options.done(() => {
      const result: RelayResult = {
        status,
        usage: usageOf(),
        streamed: false,
        ttftMs,
        response: captureText(body, rendered?.contentType ?? contentType, options.captureLimit),
      };
      if (!ok) result.error = { type: "vendor_error", code: String(status) };
      if (vendorRequestId !== undefined) result.vendorRequestId = vendorRequestId;
      if (options.keepBytes !== undefined) {
        result.sent = { headers: Object.entries(vendorHeaders), chunks: body.byteLength > 0 ? [body] : [] };
      }
      return result;
    });
    return securedResponse(
      NULL_BODY_STATUSES.has(status) ? null : (body as Uint8Array<ArrayBuffer>),
      status,
      vendorHeaders,
      options.extraHeaders,
      answered,
    );
  }

  const tap = createTap(options, sse, contentType);
  const vendorHeaders = responseHeaders(upstream.headers, !options.stripUsage);
  const kept = options.keepBytes === undefined ? undefined : new ChunkKeeper(options.keepBytes);
  let ttftMs: number | undefined;
  let ended = false;
  const end = (error: RelayResult["error"]) => {
    if (ended) return;
    ended = true;
    options.done(() => {
      const { usage, response, text } = tap.result(error === undefined);
      const result: RelayResult = { status, usage, streamed: true, response };
      if (text !== undefined) result.deliveredText = text;
      if (error) result.error = error;
      if (ttftMs !== undefined) result.ttftMs = ttftMs;
      if (vendorRequestId !== undefined) result.vendorRequestId = vendorRequestId;
      if (kept) result.sent = { headers: Object.entries(vendorHeaders), chunks: kept.chunks };
      return result;
    });
  };
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      if (first.done) {
        end(undefined);
        controller.close();
        return;
      }
      const out = tap.pass(first.value);
      if (out.byteLength > 0) {
        controller.enqueue(out);
        kept?.keep(out);
        ttftMs = performance.now() - options.arrived;
      }
      tap.observe(first.value);
    },
    // Reads until something was sent: a pull that enqueues nothing is not called again.
    async pull(controller) {
      for (;;) {
        let next: IteratorResult<Uint8Array>;
        try {
          next = await iterator.next();
        } catch (err) {
          if (ended) return;
          const code = upstreamFailureKind(err, false) === "timeout" ? "upstream_timeout" : "upstream_reset";
          end({ type: "upstream_error", code });
          // Break the client's connection too: a clean end would pass a cut stream off as complete.
          // (The host logs this error: it names the failure, not the connection.)
          controller.error(new Error(`The upstream stream broke off (${code}).`));
          return;
        }
        if (ended) return;
        if (next.done) {
          const rest = tap.rest();
          if (rest.byteLength > 0) {
            controller.enqueue(rest);
            kept?.keep(rest);
          }
          end(undefined);
          controller.close();
          return;
        }
        const out = tap.pass(next.value);
        if (out.byteLength > 0) {
          controller.enqueue(out);
          kept?.keep(out);
          ttftMs ??= performance.now() - options.arrived;
        }
        tap.observe(next.value);
        if (out.byteLength > 0) return;
      }
    },
    cancel() {
      end({ type: "client_error", code: "client_closed_request" });
      upstream.body.destroy();
    },
  });
  return securedResponse(body, status, vendorHeaders, options.extraHeaders);
}

/** Collects chunks until their total passed `limit`: past it, whoever reads them knows it is too many. */
class ChunkKeeper {
  readonly chunks: Uint8Array[] = [];
  private bytes = 0;

  constructor(private readonly limit: number) {}

  keep(chunk: Uint8Array): void {
    if (this.bytes > this.limit) return;
    this.chunks.push(chunk);
    this.bytes += chunk.byteLength;
  }
}

/**
 * A stored response as the client gets it again: its status, headers and body, a stream chunk by chunk
 * (as it was first sent), with `extraHeaders` (this call's rate-limit headers) on top.
 */
export function replayResponse(stored: StoredResponse, extraHeaders: Record<string, string>): Response {
  const headers = new Headers(stored.headers);
  for (const [name, value] of Object.entries(extraHeaders)) headers.set(name, value);
  if (NULL_BODY_STATUSES.has(stored.status)) return new Response(null, { status: stored.status, headers });
  let next = 0;
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      const chunk = stored.chunks[next++];
      if (chunk) controller.enqueue(chunk);
      else controller.close();
    },
  });
  return new Response(body, { status: stored.status, headers });
}

async function readRest(first: Uint8Array, iterator: AsyncIterator<Uint8Array>): Promise<Buffer> {
  const chunks = [first];
  let size = first.byteLength;
  for (let next = await iterator.next(); !next.done; next = await iterator.next()) {
    chunks.push(next.value);
    size += next.value.byteLength;
  }
  return Buffer.concat(chunks, size);
}

/**
 * Passes a stream's chunks on and observes them. Observation happens after a chunk was handed on, so
 * reading usage never delays it; only the variants that rewrite events (hiding the usage asked for, adding
 * the cost) observe first: they must see an event to change it.
 */
interface Tap {
  /** The bytes to send for this chunk (the chunk itself unless usage is stripped). */
  pass(chunk: Uint8Array): Uint8Array;
  observe(chunk: Uint8Array): void;
  /** Bytes held back at the end of the stream (a cut event, when stripping). */
  rest(): Uint8Array;
  result(complete: boolean): { usage: Usage; response: CapturedBody; text?: string };
}

const EMPTY = new Uint8Array();

function createTap(options: RelayOptions, sse: boolean, contentType: string | undefined): Tap {
  const binary = !sse && options.route.kind === "binary-response";
  const observer: StreamObserver | undefined = binary
    ? undefined
    : options.usage.stream(options.usageContext);
  let bytes = 0;
  const passAndCount = (chunk: Uint8Array) => {
    bytes += chunk.byteLength;
    return chunk;
  };
  // A complete stream's figures are read once: the cost sent in it is the record's.
  let final: ReturnType<StreamObserver["result"]> | undefined;
  const observed = (complete: boolean) => {
    if (!observer || !complete) return observer?.result(false);
    final ??= observer.result(true);
    return final;
  };
  const result = (complete: boolean) => {
    const seen = observed(complete);
    if (!seen) {
      const usage = options.usage.fromResponse(options.usageContext, undefined);
      usage.complete = complete;
      return { usage, response: captureMetadata(bytes, contentType) };
    }
    const { usage, message, text } = seen;
    return { usage, response: captureValue(message, bytes, contentType, options.captureLimit), text };
  };
  if (!observer) return { pass: passAndCount, observe: () => {}, rest: () => EMPTY, result };
  const asked: StreamUsageRequest | undefined = options.stripUsage ? options.route.streamUsage : undefined;
  const usageIn = options.route.usageInEvent;
  if (!asked && usageIn && options.streamCost) {
    const cost = options.streamCost;
    const finalCost = () => cost(observed(true)?.usage ?? emptyUsage());
    const framing = sse ? sseFraming() : jsonArrayFraming();
    return { ...costInLastUsage(framing, observer, usageIn, finalCost, passAndCount), result };
  }
  if (!sse) {
    const reader = new JsonArrayReader();
    return {
      pass: passAndCount,
      observe: (chunk) => {
        for (const element of reader.elements(chunk)) observer.event(element, undefined);
      },
      rest: () => EMPTY,
      result,
    };
  }
  const reader = new SseReader();
  if (!asked) {
    return {
      pass: passAndCount,
      observe: (chunk) => {
        for (const block of reader.blocks(chunk)) {
          const event = parseSseEvent(block);
          if (event) observer.event(event.data, event.event);
        }
      },
      rest: () => EMPTY,
      result,
    };
  }
  // Hiding works on whole events: an event is held until its blank line arrives, then passed on.
  return {
    pass: (chunk) => {
      let out = "";
      for (const block of reader.blocks(chunk)) {
        const event = parseSseEvent(block);
        if (event) {
          observer.event(event.data, event.event);
          if (asked.added(event.data)) continue;
        }
        out += asked.withoutAdded(block);
      }
      return passAndCount(encoder.encode(out));
    },
    observe: () => {},
    rest: () => passAndCount(encoder.encode(reader.rest())),
    result,
  };
}

/** How a stream is cut into events: SSE blocks, or the elements of a JSON array. */
interface Framing {
  /** The text a chunk completes, piece by piece: an event's text with its data, or text between events. */
  pieces(chunk: Uint8Array): { text: string; data?: string; name?: string | undefined }[];
  /** What is left at the end of the stream. */
  rest(): string;
  /** An event's text with `data` in place of its data. */
  withData(text: string, data: string): string;
}

function sseFraming(): Framing {
  const reader = new SseReader();
  return {
    pieces: (chunk) =>
      reader.blocks(chunk).map((block) => {
        const event = parseSseEvent(block);
        return event ? { text: block, data: event.data, name: event.event } : { text: block };
      }),
    rest: () => reader.rest(),
    withData: withEventData,
  };
}

function jsonArrayFraming(): Framing {
  const reader = new JsonArrayReader();
  return {
    pieces: (chunk) =>
      reader.pieces(chunk).map((piece) => (piece.element ? { text: piece.text, data: piece.text } : piece)),
    rest: () => reader.rest(),
    withData: (_element, data) => data,
  };
}

/**
 * Puts the call's cost in the stream's last event with usage, as `dmt_cost_usd` in its usage object.
 * Which event is the last is known only at the end, and its cost only from the final usage: so an
 * event with usage is held, with what follows it, until the next one (then it passes as it came) or
 * the end of the stream (then it passes with the cost). Events before it pass at once.
 */
function costInLastUsage(
  framing: Framing,
  observer: StreamObserver,
  usageIn: UsageInEvent,
  finalCost: () => string | undefined,
  passAndCount: (chunk: Uint8Array) => Uint8Array,
): Omit<Tap, "result"> {
  let held: { text: string; json: JsonObject; usage: JsonObject } | undefined;
  let heldAfter = "";
  return {
    pass(chunk) {
      let out = "";
      for (const { text, data, name } of framing.pieces(chunk)) {
        if (data !== undefined) observer.event(data, name);
        const json = data === undefined ? undefined : asObject(parseJson(data));
        const usage = json && usageIn(json, name);
        if (json && usage) {
          if (held) out += held.text + heldAfter;
          held = { text, json, usage };
          heldAfter = "";
        } else if (held) heldAfter += text;
        else out += text;
      }
      return passAndCount(encoder.encode(out));
    },
    observe: () => {},
    rest() {
      let out = "";
      if (held) {
        const cost = finalCost();
        if (cost === undefined) out = held.text;
        else {
          held.usage.dmt_cost_usd = cost;
          out = framing.withData(held.text, JSON.stringify(held.json));
        }
        out += heldAfter;
      }
      return passAndCount(encoder.encode(out + framing.rest()));
    },
  };
}

/** The client's format of a whole answer the vendor gave as JSON for its usage; undefined to send it as is. */
function renderedAnswer(
  json: unknown,
  render: UsageFormat["render"],
): { body: Buffer; contentType: string } | undefined {
  const object = asObject(json);
  const out = object && render(object);
  return out && { body: Buffer.from(out.body, "utf8"), contentType: out.contentType };
}
