// Anthropic as data and its usage: the routes, usage from bodies and stream events, and the definition
// the proxy serves under /anthropic.
import { estimateTokens } from "../core/token-estimate";
import { addUnpriced, emptyUsage, type Usage, unknownUsageFields } from "../core/usage";
import type {
  StreamObserver,
  UsageContext,
  UsageExtractor,
  VendorDefinition,
  VendorRoute,
} from "../core/vendor-model";
import { asObject, asString, count, type JsonObject, parseJson } from "./json";
import { healthRoutes, JSON_BODY_LIMIT, modelRoutes } from "./routes";

const json = { kind: "json", bodyLimit: JSON_BODY_LIMIT } as const;

export const anthropicRoutes: readonly VendorRoute[] = [
  ...healthRoutes("anthropic"),
  {
    method: "POST",
    path: "/v1/messages",
    operation: "messages",
    ...json,
    stream: "body-flag",
    billing: "billable",
    // The cumulative usage of the message, at its end.
    usageInEvent: (event) => (event.type === "message_delta" ? asObject(event.usage) : undefined),
  },
  {
    method: "POST",
    path: "/v1/complete",
    operation: "complete",
    ...json,
    stream: "body-flag",
    billing: "billable",
  },
  ...modelRoutes("/v1/models"),
  // The SDK's path, and the spec's shorter one, which Anthropic itself does not serve.
  {
    method: "POST",
    path: "/v1/messages/count_tokens",
    operation: "count_tokens",
    ...json,
    stream: "never",
    billing: "free",
  },
  {
    method: "POST",
    path: "/v1/count_tokens",
    upstreamPath: "/v1/messages/count_tokens",
    operation: "count_tokens",
    ...json,
    stream: "never",
    billing: "free",
  },
];

/** The usage fields read below; any other count the vendor reports is kept as unpriced. */
const KNOWN_FIELDS = new Set([
  "input_tokens",
  "output_tokens",
  "cache_read_input_tokens",
  "cache_creation_input_tokens",
  "cache_creation.ephemeral_5m_input_tokens",
  "cache_creation.ephemeral_1h_input_tokens",
  "server_tool_use.web_search_requests",
  "server_tool_use.web_fetch_requests",
]);

/**
 * Anthropic reports cache reads and writes apart from `input_tokens`; our input total includes them
 * (see core/usage.ts). `cache_creation` splits the writes by TTL (5 minutes, 1 hour); server-side
 * tools count their requests in `server_tool_use`. Thinking tokens are part of `output_tokens`.
 */
export function anthropicUsage(raw: JsonObject): Usage {
  const usage = emptyUsage();
  const cacheRead = count(raw.cache_read_input_tokens);
  const cacheWrite = count(raw.cache_creation_input_tokens);
  usage.inputTokens = count(raw.input_tokens) + cacheRead + cacheWrite;
  usage.cachedInputTokens = cacheRead;
  usage.cacheWriteTokens = cacheWrite;
  usage.outputTokens = count(raw.output_tokens);
  const oneHour = Math.min(count(asObject(raw.cache_creation)?.ephemeral_1h_input_tokens), cacheWrite);
  if (oneHour > 0) usage.cacheWrite1hTokens = oneHour;
  const tools = asObject(raw.server_tool_use);
  const searches = count(tools?.web_search_requests);
  const fetches = count(tools?.web_fetch_requests);
  if (searches + fetches > 0) {
    usage.toolCalls = {};
    if (searches > 0) usage.toolCalls.web_search = searches;
    if (fetches > 0) usage.toolCalls.web_fetch = fetches;
  }
  const tier = asString(raw.service_tier);
  if (tier !== undefined) usage.serviceTier = tier;
  addUnpriced(usage, unknownUsageFields(raw, KNOWN_FIELDS));
  return usage;
}

/** The legacy text completions API reports no usage: estimated from the prompt and the completion. */
function estimatedCompletion(context: UsageContext, completion: string): Usage {
  return {
    ...emptyUsage(),
    inputTokens: estimateTokens(asString(context.request?.prompt) ?? ""),
    outputTokens: estimateTokens(completion),
    estimated: true,
  };
}

function fromResponse(context: UsageContext, body: unknown): Usage {
  const response = asObject(body);
  switch (context.operation) {
    case "messages": {
      const usage = asObject(response?.usage);
      return usage ? anthropicUsage(usage) : { ...emptyUsage(), estimated: true };
    }
    case "complete":
      return estimatedCompletion(context, asString(response?.completion) ?? "");
    default:
      return emptyUsage();
  }
}

interface Block extends JsonObject {
  type: string;
}

/**
 * Observes a messages stream: `message_start` carries the message and its input usage,
 * `content_block_*` build the content, `message_delta` carries the stop reason and the cumulative
 * usage (output tokens, and any field it repeats supersedes the start's). Legacy `completion` events
 * concatenate their text.
 */
class AnthropicStreamObserver implements StreamObserver {
  private message: JsonObject | undefined;
  private readonly content: Block[] = [];
  /** Partial JSON of tool_use inputs, by block index. */
  private readonly partialJson = new Map<number, string>();
  private rawUsage: JsonObject = {};
  private completion = "";
  private completionHead: JsonObject = {};

  constructor(private readonly context: UsageContext) {}

  event(data: string, name: string | undefined): void {
    const event = asObject(parseJson(data));
    if (!event) return;
    switch (event.type ?? name) {
      case "message_start": {
        const message = asObject(event.message);
        if (!message) return;
        this.message = { ...message };
        this.rawUsage = { ...asObject(message.usage) };
        return;
      }
      case "content_block_start": {
        const block = asObject(event.content_block);
        if (block) this.content[count(event.index)] = { ...block, type: asString(block.type) ?? "text" };
        return;
      }
      case "content_block_delta":
        this.onDelta(count(event.index), asObject(event.delta));
        return;
      case "content_block_stop": {
        const index = count(event.index);
        const json = this.partialJson.get(index);
        const block = this.content[index];
        if (json !== undefined && block) block.input = parseJson(json) ?? json;
        return;
      }
      case "message_delta": {
        const delta = asObject(event.delta);
        if (this.message && delta) Object.assign(this.message, delta);
        const usage = asObject(event.usage);
        if (usage) {
          for (const [key, value] of Object.entries(usage)) if (value != null) this.rawUsage[key] = value;
        }
        return;
      }
      case "completion":
        this.completion += asString(event.completion) ?? "";
        this.completionHead = { ...event, completion: undefined };
        return;
    }
  }

  private onDelta(index: number, delta: JsonObject | undefined): void {
    const block = this.content[index];
    if (!delta || !block) return;
    switch (delta.type) {
      case "text_delta":
        block.text = `${asString(block.text) ?? ""}${asString(delta.text) ?? ""}`;
        break;
      case "thinking_delta":
        block.thinking = `${asString(block.thinking) ?? ""}${asString(delta.thinking) ?? ""}`;
        break;
      case "signature_delta":
        block.signature = delta.signature;
        break;
      case "input_json_delta":
        this.partialJson.set(
          index,
          (this.partialJson.get(index) ?? "") + (asString(delta.partial_json) ?? ""),
        );
        break;
    }
  }

  result(complete: boolean): { usage: Usage; message: unknown; text: string } {
    if (this.context.operation === "complete") {
      const usage = estimatedCompletion(this.context, this.completion);
      usage.complete = complete;
      return {
        usage,
        message: { ...this.completionHead, completion: this.completion },
        text: this.completion,
      };
    }
    const usage = this.message ? anthropicUsage(this.rawUsage) : { ...emptyUsage(), estimated: true };
    usage.complete = complete;
    const message = this.message
      ? { ...this.message, content: this.content.filter(Boolean), usage: this.rawUsage }
      : undefined;
    return { usage, message, text: this.deliveredText() };
  }

  /** Text, thinking and tool inputs as they streamed (a tool input still partial included). */
  private deliveredText(): string {
    let text = "";
    this.content.forEach((block, index) => {
      text += (asString(block?.text) ?? "") + (asString(block?.thinking) ?? "");
      text += this.partialJson.get(index) ?? "";
    });
    return text;
  }
}

export const anthropicUsageExtractor: UsageExtractor = {
  fromResponse,
  stream: (context) => new AnthropicStreamObserver(context),
};

export const anthropic: VendorDefinition = {
  name: "anthropic",
  defaultUpstream: "https://api.anthropic.com",
  routes: anthropicRoutes,
  authHeaders: (vendorKey) => ({ "x-api-key": vendorKey }),
  requestHeaders: ["anthropic-version", "anthropic-beta"],
  // The API refuses calls without a version; the SDKs always send one, curl users often do not.
  defaultHeaders: { "anthropic-version": "2023-06-01" },
  usage: anthropicUsageExtractor,
};
