import { estimateTokens } from "../../core/token-estimate";
import { emptyUsage, type Usage } from "../../core/usage";
import type { StreamObserver, UsageContext, UsageExtractor } from "../../core/vendor-model";
import { asArray, asObject, asString, count, type JsonObject, parseJson, setIfDefined } from "../json";

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
    case "generate":
      return metadata ? geminiUsage(metadata) : { ...emptyUsage(), estimated: true };
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
}

/** Observes `streamGenerateContent`: every chunk is a partial response; the last usage seen is the total. */
class GeminiStreamObserver implements StreamObserver {
  private metadata: JsonObject | undefined;
  private readonly head: JsonObject = {};
  private readonly candidates = new Map<number, Candidate>();

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
      const content = asObject(candidate.content);
      if (typeof content?.role === "string") state.role = content.role;
      for (const rawPart of asArray(content?.parts)) addPart(state.parts, asObject(rawPart));
    }
  }

  result(complete: boolean): { usage: Usage; message: unknown } {
    const usage = this.metadata ? geminiUsage(this.metadata) : { ...emptyUsage(), estimated: true };
    usage.complete = complete;
    const candidates = [...this.candidates.values()].map((c) => {
      const out: JsonObject = { content: { role: c.role, parts: c.parts }, index: c.index };
      setIfDefined(out, "finishReason", c.finishReason);
      return out;
    });
    const message: JsonObject = { candidates };
    setIfDefined(message, "usageMetadata", this.metadata);
    return { usage, message: Object.assign(message, this.head) };
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
