/** Anthropic's wire formats: messages (with prompt caching), the legacy complete API, token counting, models. */
import {
  jsonReply,
  namedEvent,
  optionalLimit,
  type Reply,
  readJson,
  requireString,
  type SimRequest,
  type SimState,
  SimulatedError,
  streamReply,
} from "./reply";
import { estimateTokens, generate, textsOf } from "./text";
import { anthropicUsageReport } from "./usage-report";
import type { Route, VendorSim } from "./vendor";

/** The smallest prefix Anthropic caches (Sonnet/Opus). */
const CACHE_MIN_TOKENS = 1024;

interface PromptBlock {
  tokens: number;
  text: string;
  cacheTtl?: "5m" | "1h";
}

function block(value: unknown): PromptBlock {
  const texts = textsOf(value);
  // Blocks without text (images, tool calls) count by their JSON size.
  const text = texts.length > 0 ? texts.join(" ") : JSON.stringify(value);
  const cacheControl = (value as { cache_control?: { ttl?: unknown } } | null)?.cache_control;
  return {
    tokens: estimateTokens(text),
    text,
    ...(cacheControl ? { cacheTtl: cacheControl.ttl === "1h" ? "1h" : "5m" } : {}),
  };
}

function contentBlocks(content: unknown): PromptBlock[] {
  if (typeof content === "string") return [block(content)];
  return Array.isArray(content) ? content.map(block) : [];
}

interface Prompt {
  seed: string;
  /** Every input token, cached or not. */
  totalTokens: number;
  usage: {
    input_tokens: number;
    cache_creation_input_tokens: number;
    cache_read_input_tokens: number;
    cache_creation: { ephemeral_5m_input_tokens: number; ephemeral_1h_input_tokens: number };
  };
}

/** Prompt tokens in Anthropic's split: a cache breakpoint's prefix is written once, then read. */
function promptOf(body: Record<string, unknown>, state: SimState | undefined): Prompt {
  const messages = Array.isArray(body.messages) ? body.messages : [];
  const blocks = [
    ...(Array.isArray(body.tools) ? body.tools.map((tool) => block(JSON.stringify(tool))) : []),
    ...contentBlocks(body.system),
    ...messages.flatMap((m) => contentBlocks((m as { content?: unknown } | null)?.content)),
  ];
  let totalTokens = 0;
  for (const b of blocks) totalTokens += b.tokens;
  let seed = "";
  for (let i = messages.length - 1; i >= 0 && seed === ""; i--) {
    const message = messages[i] as { role?: unknown; content?: unknown } | null;
    if (message?.role === "user") seed = textsOf(message.content).join(" ");
  }
  const usage = {
    input_tokens: totalTokens,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: 0,
    cache_creation: { ephemeral_5m_input_tokens: 0, ephemeral_1h_input_tokens: 0 },
  };
  const breakpoint = blocks.findLastIndex((b) => b.cacheTtl !== undefined);
  if (state && breakpoint !== -1) {
    const prefix = blocks.slice(0, breakpoint + 1);
    let prefixTokens = 0;
    for (const b of prefix) prefixTokens += b.tokens;
    if (prefixTokens >= CACHE_MIN_TOKENS) {
      usage.input_tokens -= prefixTokens;
      if (state.seenBefore(`anthropic\n${String(body.model)}\n${prefix.map((b) => b.text).join("\n")}`)) {
        usage.cache_read_input_tokens = prefixTokens;
      } else {
        usage.cache_creation_input_tokens = prefixTokens;
        const ttlKey =
          blocks[breakpoint]?.cacheTtl === "1h" ? "ephemeral_1h_input_tokens" : "ephemeral_5m_input_tokens";
        usage.cache_creation[ttlKey] = prefixTokens;
      }
    }
  }
  return { seed, totalTokens, usage };
}

function requireMessages(body: Record<string, unknown>): void {
  if (!Array.isArray(body.messages) || body.messages.length === 0) {
    throw new SimulatedError(400, "messages: Field required");
  }
}

const messages: Route = (req, state) => {
  const body = readJson(req);
  const model = requireString(body, "model");
  const maxTokens = optionalLimit(body, "max_tokens");
  if (maxTokens === undefined) throw new SimulatedError(400, "max_tokens: Field required");
  requireMessages(body);
  const prompt = promptOf(body, state);
  const gen = generate(prompt.seed, maxTokens, 0);
  const stopReason = gen.truncated ? "max_tokens" : "end_turn";
  const id = state.nextId("msg_");
  const usage = { ...prompt.usage, output_tokens: gen.textTokens, service_tier: "standard" };
  state.usage.add("anthropic", {
    model,
    uncachedInput: prompt.usage.input_tokens,
    cachedInput: prompt.usage.cache_read_input_tokens,
    cacheWrite5m: prompt.usage.cache_creation.ephemeral_5m_input_tokens,
    cacheWrite1h: prompt.usage.cache_creation.ephemeral_1h_input_tokens,
    output: gen.textTokens,
  });
  if (body.stream !== true) {
    return jsonReply({
      id,
      type: "message",
      role: "assistant",
      model,
      content: [{ type: "text", text: gen.text }],
      stop_reason: stopReason,
      stop_sequence: null,
      usage,
    });
  }
  const chunks = [
    namedEvent({
      type: "message_start",
      message: {
        id,
        type: "message",
        role: "assistant",
        model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        // The vendor reports a first output token here; message_delta carries the cumulative total.
        usage: { ...usage, output_tokens: 1 },
      },
    }),
    namedEvent({ type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }),
    namedEvent({ type: "ping" }),
    ...gen.pieces.map((text) =>
      namedEvent({ type: "content_block_delta", index: 0, delta: { type: "text_delta", text } }),
    ),
    namedEvent({ type: "content_block_stop", index: 0 }),
    namedEvent({
      type: "message_delta",
      delta: { stop_reason: stopReason, stop_sequence: null },
      usage: {
        input_tokens: usage.input_tokens,
        cache_creation_input_tokens: usage.cache_creation_input_tokens,
        cache_read_input_tokens: usage.cache_read_input_tokens,
        output_tokens: gen.textTokens,
      },
    }),
    namedEvent({ type: "message_stop" }),
  ];
  return streamReply(chunks);
};

/** The legacy text completions API: no usage in its answers. */
const complete: Route = (req, state) => {
  const body = readJson(req);
  const model = requireString(body, "model");
  const prompt = requireString(body, "prompt");
  const limit = optionalLimit(body, "max_tokens_to_sample");
  if (limit === undefined) throw new SimulatedError(400, "max_tokens_to_sample: Field required");
  const humanTurn = prompt.split("Human:").at(-1) ?? prompt;
  const gen = generate(humanTurn.replace("Assistant:", ""), limit, 0);
  const stopReason = gen.truncated ? "max_tokens" : "stop_sequence";
  const id = state.nextId("compl_");
  if (body.stream !== true) {
    return jsonReply({
      type: "completion",
      id,
      completion: ` ${gen.text}`,
      stop_reason: stopReason,
      stop: gen.truncated ? null : "\n\nHuman:",
      model,
    });
  }
  const event = (completion: string, stop: string | null) =>
    namedEvent({ type: "completion", id, completion, stop_reason: stop, model });
  const [first, ...rest] = gen.pieces.map((piece, i) => event(i === 0 ? ` ${piece}` : piece, null));
  return streamReply([
    ...(first ? [first] : []),
    namedEvent({ type: "ping" }),
    ...rest,
    event("", stopReason),
  ]);
};

const countTokens: Route = (req) => {
  const body = readJson(req);
  requireString(body, "model");
  requireMessages(body);
  return jsonReply({ input_tokens: promptOf(body, undefined).totalTokens });
};

const MODELS = [
  ["claude-opus-4-7", "Claude Opus 4.7", "2026-01-01T00:00:00Z"],
  ["claude-sonnet-4-6", "Claude Sonnet 4.6", "2026-01-01T00:00:00Z"],
  ["claude-haiku-4-5-20251001", "Claude Haiku 4.5", "2025-10-01T00:00:00Z"],
] as const;

const modelObject = ([id, display_name, created_at]: (typeof MODELS)[number]) => ({
  type: "model",
  id,
  display_name,
  created_at,
});

/** `GET /v1/models/{model_id}`: the model, or Anthropic's 404. */
const MODEL_LOOKUP = /^\/v1\/models\/(.+)$/;
const model =
  (id: string): Route =>
  () => {
    const found = MODELS.find(([known]) => known === id);
    if (!found) throw new SimulatedError(404, `model: ${id}`);
    return jsonReply(modelObject(found));
  };

const models: Route = () => {
  const data = MODELS.map(modelObject);
  return jsonReply({
    data,
    has_more: false,
    first_id: data[0]?.id ?? null,
    last_id: data.at(-1)?.id ?? null,
  });
};

const ROUTES = new Map<string, Route>([
  ["POST /v1/messages", messages],
  ["POST /v1/complete", complete],
  ["POST /v1/messages/count_tokens", countTokens],
  ["POST /v1/count_tokens", countTokens],
  ["GET /v1/models", models],
  ["GET /v1/organizations/usage_report/messages", anthropicUsageReport],
]);

const ERROR_TYPES: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  402: "billing_error",
  403: "permission_error",
  404: "not_found_error",
  413: "request_too_large",
  429: "rate_limit_error",
  500: "api_error",
  504: "timeout_error",
  529: "overloaded_error",
};

export const anthropic: VendorSim = {
  authenticate(req: SimRequest) {
    // The SDK (1.12) sends its API key as `Authorization: Bearer`; `x-api-key` is the documented header.
    if (!req.headers["x-api-key"] && !/^Bearer\s+\S/i.test(req.headers.authorization ?? "")) {
      return new SimulatedError(401, "x-api-key header is required");
    }
    if (!req.headers["anthropic-version"])
      return new SimulatedError(400, "anthropic-version: header is required");
    return undefined;
  },
  route: (req) => {
    const lookup = req.method === "GET" ? MODEL_LOOKUP.exec(req.path) : null;
    return lookup ? model(decodeURIComponent(lookup[1] as string)) : ROUTES.get(`${req.method} ${req.path}`);
  },
  notFound: () => new SimulatedError(404, "Not Found"),
  errorReply(error: SimulatedError, req: SimRequest): Reply {
    const type = ERROR_TYPES[error.status] ?? (error.status >= 500 ? "api_error" : "invalid_request_error");
    return jsonReply(
      { type: "error", error: { type, message: error.message }, request_id: req.requestId },
      error.status,
    );
  },
  headers: (req) => ({ "request-id": req.requestId }),
};
