// Gemini as data and its usage: the routes, usage from bodies and streams (SSE or a JSON array), and
// the definition the proxy serves under /gemini.
import { errors } from "../core/errors";
import { estimateTokens } from "../core/token-estimate";
import { addUnpriced, emptyUsage, type Usage, unknownUsageFields } from "../core/usage";
import type {
  Operation,
  StreamDetection,
  StreamObserver,
  UsageContext,
  UsageExtractor,
  VendorDefinition,
  VendorRoute,
} from "../core/vendor-model";
import { asArray, asObject, asString, count, type JsonObject, parseJson, setIfDefined } from "./json";
import { healthRoutes, JSON_BODY_LIMIT, modelRoutes } from "./routes";

const MODEL_METHODS: [string, Operation, StreamDetection, "free" | "billable"][] = [
  ["generateContent", "generate", "never", "billable"],
  ["streamGenerateContent", "generate", "always", "billable"],
  ["embedContent", "embed", "never", "billable"],
  // What the Gemini SDK calls for `models.embedContent`.
  ["batchEmbedContents", "embed", "never", "billable"],
  ["countTokens", "count_tokens", "never", "free"],
];

/** `v1` is the stable API; `v1beta` is the Gemini SDK's default: the same model routes under both. */
const versionRoutes = (version: string): VendorRoute[] => [
  ...MODEL_METHODS.map(
    ([method, operation, stream, billing]): VendorRoute => ({
      method: "POST",
      path: `/${version}/models/{model}:${method}`,
      operation,
      kind: "json",
      bodyLimit: JSON_BODY_LIMIT,
      stream,
      billing,
      // Every chunk may report the usage so far; the last one's is the total.
      ...(stream === "always" ? { usageInEvent: (event) => asObject(event.usageMetadata) } : {}),
    }),
  ),
  // After the method routes: `models/{model}` would take their paths.
  ...modelRoutes(`/${version}/models`),
];

export const geminiRoutes: readonly VendorRoute[] = [
  ...healthRoutes("gemini"),
  ...versionRoutes("v1"),
  ...versionRoutes("v1beta"),
  {
    method: "POST",
    path: "/v1beta/cachedContents",
    operation: "cached_content",
    kind: "json",
    bodyLimit: JSON_BODY_LIMIT,
    stream: "never",
    billing: "billable",
  },
];

/**
 * Gemini's `usageMetadata`: the cached part is inside `promptTokenCount`; thoughts are reported apart
 * from candidates, so our output total adds them (see core/usage.ts); tool-use prompt tokens are input.
 */
export function geminiUsage(raw: JsonObject): Usage {
  const usage = emptyUsage();
  const thoughts = count(raw.thoughtsTokenCount);
  usage.inputTokens = count(raw.promptTokenCount) + count(raw.toolUsePromptTokenCount);
  usage.cachedInputTokens = count(raw.cachedContentTokenCount);
  usage.outputTokens = count(raw.candidatesTokenCount) + thoughts;
  usage.reasoningTokens = thoughts;
  // The per-modality lists split the totals: audio input is billed apart on the models that say so.
  const audio = asArray(raw.promptTokensDetails)
    .map((detail) => asObject(detail))
    .filter((detail) => detail?.modality === "AUDIO")
    .reduce((sum, detail) => sum + count(detail?.tokenCount), 0);
  if (audio > 0) usage.audioInputTokens = audio;
  addUnpriced(usage, unknownUsageFields(raw, KNOWN_FIELDS));
  return usage;
}

/** The counts read above; the per-modality lists are arrays, which the unknown-field walk passes over. */
const KNOWN_FIELDS = new Set([
  "promptTokenCount",
  "candidatesTokenCount",
  "totalTokenCount",
  "cachedContentTokenCount",
  "thoughtsTokenCount",
  "toolUsePromptTokenCount",
]);

/**
 * Grounding with Google Search: each candidate's `groundingMetadata.webSearchQueries` are the searches
 * run (Gemini 3 bills each; Gemini 2 bills the request once, see prices/README.md). Metadata without
 * queries still means the request was grounded: one.
 */
function withGrounding(usage: Usage, metadata: Iterable<JsonObject>): Usage {
  let queries = 0;
  for (const grounding of metadata) queries += Math.max(asArray(grounding.webSearchQueries).length, 1);
  if (queries > 0) usage.toolCalls = { google_search: queries };
  return usage;
}

/** The text parts of one `Content`. */
function contentText(content: unknown): string {
  return asArray(asObject(content)?.parts)
    .map((part) => asString(asObject(part)?.text) ?? "")
    .join("");
}

/** Embedding calls report no usage: estimated from the text sent (one content, or a batch of requests). */
function estimatedEmbedding(request: JsonObject | undefined): Usage {
  const batch = asArray(request?.requests).map((r) => contentText(asObject(r)?.content));
  const text = batch.length > 0 ? batch.join("") : contentText(request?.content);
  return { ...emptyUsage(), inputTokens: estimateTokens(text), estimated: true };
}

function fromResponse(context: UsageContext, body: unknown): Usage {
  const response = asObject(body);
  const metadata = asObject(response?.usageMetadata);
  switch (context.operation) {
    case "generate": {
      const usage = metadata ? geminiUsage(metadata) : { ...emptyUsage(), estimated: true };
      const grounding = asArray(response?.candidates).flatMap((candidate) => {
        const found = asObject(asObject(candidate)?.groundingMetadata);
        return found ? [found] : [];
      });
      return withGrounding(usage, grounding);
    }
    case "embed":
      return metadata ? geminiUsage(metadata) : estimatedEmbedding(context.request);
    case "cached_content": {
      // Creating a cache writes its whole content once.
      const total = count(metadata?.totalTokenCount);
      return { ...emptyUsage(), inputTokens: total, cacheWriteTokens: total, estimated: !metadata };
    }
    default:
      return emptyUsage();
  }
}

interface Candidate {
  index: number;
  role: string;
  parts: JsonObject[];
  finishReason?: unknown;
  groundingMetadata?: JsonObject;
}

/** Observes `streamGenerateContent`: every chunk is a partial response; the last usage seen is the total. */
class GeminiStreamObserver implements StreamObserver {
  private metadata: JsonObject | undefined;
  private readonly head: JsonObject = {};
  private readonly candidates = new Map<number, Candidate>();
  /** The last grounding metadata of each candidate. */
  private readonly grounding = new Map<number, JsonObject>();

  event(data: string): void {
    const chunk = asObject(parseJson(data));
    if (!chunk) return;
    const metadata = asObject(chunk.usageMetadata);
    if (metadata) this.metadata = metadata;
    setIfDefined(this.head, "modelVersion", chunk.modelVersion);
    setIfDefined(this.head, "responseId", chunk.responseId);
    for (const raw of asArray(chunk.candidates)) {
      const candidate = asObject(raw);
      if (!candidate) continue;
      const index = count(candidate.index);
      let state = this.candidates.get(index);
      if (!state) {
        state = { index, role: "model", parts: [] };
        this.candidates.set(index, state);
      }
      if (candidate.finishReason !== undefined) state.finishReason = candidate.finishReason;
      const grounding = asObject(candidate.groundingMetadata);
      if (grounding) {
        this.grounding.set(index, grounding);
        state.groundingMetadata = grounding;
      }
      const content = asObject(candidate.content);
      if (typeof content?.role === "string") state.role = content.role;
      for (const rawPart of asArray(content?.parts)) addPart(state.parts, asObject(rawPart));
    }
  }

  result(complete: boolean): { usage: Usage; message: unknown; text: string } {
    const usage = this.metadata ? geminiUsage(this.metadata) : { ...emptyUsage(), estimated: true };
    withGrounding(usage, this.grounding.values());
    usage.complete = complete;
    const candidates = [...this.candidates.values()].map((c) => {
      const out: JsonObject = { content: { role: c.role, parts: c.parts }, index: c.index };
      setIfDefined(out, "finishReason", c.finishReason);
      setIfDefined(out, "groundingMetadata", c.groundingMetadata);
      return out;
    });
    const message: JsonObject = { candidates };
    setIfDefined(message, "usageMetadata", this.metadata);
    return { usage, message: Object.assign(message, this.head), text: this.deliveredText() };
  }

  /** The parts' text (thoughts included) and function-call arguments, as they streamed. */
  private deliveredText(): string {
    let text = "";
    for (const candidate of this.candidates.values()) {
      for (const part of candidate.parts) {
        text += asString(part.text) ?? "";
        const call = asObject(part.functionCall);
        if (call) text += (asString(call.name) ?? "") + JSON.stringify(call.args ?? {});
      }
    }
    return text;
  }
}

/** Consecutive text parts merge into one (as the non-streamed response has them); others are kept. */
function addPart(parts: JsonObject[], part: JsonObject | undefined): void {
  if (!part) return;
  const last = parts[parts.length - 1];
  const mergeable = (p: JsonObject) => typeof p.text === "string" && !p.thought === !part.thought;
  if (last && typeof part.text === "string" && mergeable(last)) {
    last.text = `${last.text}${part.text}`;
    return;
  }
  parts.push({ ...part });
}

export const geminiUsageExtractor: UsageExtractor = {
  fromResponse,
  stream: () => new GeminiStreamObserver(),
};

export const gemini: VendorDefinition = {
  name: "gemini",
  defaultUpstream: "https://generativelanguage.googleapis.com",
  routes: geminiRoutes,
  authHeaders: (vendorKey) => ({ "x-goog-api-key": vendorKey }),
  requestHeaders: ["x-goog-api-client"],
  checkQuery(query) {
    // Other encodings (`alt=json` on a stream, `alt=proto`) would change the wire format we relay and read.
    for (const name of ["alt", "$alt"]) {
      for (const value of query.getAll(name)) {
        if (value !== "sse") {
          throw errors.invalidField(name, "only 'sse' is supported (or leave it out).");
        }
      }
    }
  },
  usage: geminiUsageExtractor,
};
