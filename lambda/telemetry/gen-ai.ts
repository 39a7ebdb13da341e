import type { ProxyCall, ProxyOutcome } from "../core/call";
import type { Usage } from "../core/usage";
import type { Operation, VendorName } from "../core/vendor-model";

/**
 * A proxied call in the OpenTelemetry GenAI semantic conventions (gen-ai spans and metrics, status
 * "development"), plus our own attributes under `dmt.`: what Datadog, Grafana, Honeycomb or Langfuse
 * read. Never a body, a key or a user id: ids of the project, the key and the call only.
 */

export type AttributeValue = string | number | boolean;
export type Attributes = Record<string, AttributeValue>;

/** `gen_ai.provider.name`: the conventions' well-known values. */
const PROVIDERS: Record<VendorName, string> = {
  openai: "openai",
  anthropic: "anthropic",
  groq: "groq",
  // The Gemini Developer API (AI Studio), as opposed to `gcp.vertex_ai`.
  gemini: "gcp.gemini",
};

/** `gen_ai.operation.name`: the conventions' values where one fits; our operation's name otherwise. */
const OPERATIONS: Partial<Record<Operation, string>> = {
  chat: "chat",
  messages: "chat",
  responses: "chat",
  completions: "text_completion",
  complete: "text_completion",
  embeddings: "embeddings",
  embed: "embeddings",
  generate: "generate_content",
};

export function operationName(call: ProxyCall): string {
  const operation = call.route?.operation;
  return operation === undefined ? "unknown" : (OPERATIONS[operation] ?? operation);
}

/** The conventions' buckets for `gen_ai.client.token.usage` ({token}) and `.operation.duration` (s). */
export const TOKEN_BUCKETS = [
  1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864,
];
export const DURATION_BUCKETS = [
  0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];

/** What one call gives the span and the metrics. */
export interface GenAiCall {
  spanName: string;
  /** The span's attributes. */
  span: Attributes;
  /** The metrics' attributes: the conventions' (few values each) and the project. */
  metric: Attributes;
  /** Input and output tokens, when the call used any (refusals and failures before the vendor did not). */
  tokens?: { input: number; output: number };
  durationS: number;
  failed: boolean;
}

export function genAiCall(call: ProxyCall, outcome: ProxyOutcome): GenAiCall {
  const operation = operationName(call);
  // The usage metering charged (an estimate for an abandoned stream) when it set one; else the vendor's.
  const usage: Usage = call.billing?.usage ?? outcome.usage;
  const responseModel = outcome.response.text ? responseModelOf(outcome.response.text) : undefined;
  const errorType = outcome.error ? outcome.error.code || outcome.error.type : undefined;
  const common: Attributes = {
    "gen_ai.operation.name": operation,
    "gen_ai.provider.name": PROVIDERS[call.vendor],
    ...(call.model !== undefined && { "gen_ai.request.model": call.model }),
    ...(responseModel !== undefined && { "gen_ai.response.model": responseModel }),
    ...(errorType !== undefined && { "error.type": errorType }),
  };
  const used = usage.inputTokens > 0 || usage.outputTokens > 0;
  const cost = call.billing?.costMicros;
  const span: Attributes = {
    ...common,
    ...(used && {
      // Our input count already holds cache reads and writes (core/usage.ts), as the conventions ask.
      "gen_ai.usage.input_tokens": usage.inputTokens,
      "gen_ai.usage.output_tokens": usage.outputTokens,
      "gen_ai.usage.cache_read.input_tokens": usage.cachedInputTokens,
      "gen_ai.usage.cache_creation.input_tokens": usage.cacheWriteTokens,
    }),
    ...(usage.reasoningTokens > 0 && { "gen_ai.usage.reasoning.output_tokens": usage.reasoningTokens }),
    "http.request.method": call.method,
    "http.response.status_code": outcome.status,
    "dmt.transaction_id": call.id,
    "dmt.project_id": call.auth.projectId,
    "dmt.key_id": call.auth.keyId,
    "dmt.endpoint": call.endpoint,
    "dmt.streamed": outcome.streamed,
    ...(call.billing && { "dmt.billing_mode": call.billing.mode }),
    // Proposed upstream only, hence ours: USD as a decimal number (the record keeps exact micro-USD).
    ...(cost !== undefined && { "dmt.cost_usd": cost / 1_000_000 }),
    ...(call.billing?.priceVersion !== undefined && { "dmt.price_version": call.billing.priceVersion }),
    ...(usage.estimated && { "dmt.usage_estimated": true }),
    ...(outcome.ttftMs !== undefined && { "dmt.ttft_ms": outcome.ttftMs }),
    ...(outcome.vendorRequestId !== undefined && { "dmt.vendor_request_id": outcome.vendorRequestId }),
  };
  return {
    spanName: call.model === undefined ? operation : `${operation} ${call.model}`,
    span,
    metric: { ...common, "dmt.project_id": call.auth.projectId },
    ...(used && { tokens: { input: usage.inputTokens, output: usage.outputTokens } }),
    durationS: outcome.latencyMs / 1000,
    failed: outcome.error !== undefined,
  };
}

/**
 * The model the vendor says answered: `model` (OpenAI, Groq, Anthropic) or `modelVersion` (Gemini) of
 * the response's JSON, a stream's assembled message included. The first such member outside any
 * string: a quote inside a JSON string is escaped, so `"model"` after `{` or `,` is a member name.
 */
export function responseModelOf(text: string): string | undefined {
  const found = /[{,]\s*"(?:model|modelVersion)"\s*:\s*"([^"\\]{1,256})"/.exec(text);
  return found?.[1];
}
