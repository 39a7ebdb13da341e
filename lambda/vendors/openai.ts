// OpenAI as data and its usage: the routes (what a body must have, the hold bounds, what a stream's
// usage needs, with `stream_options.include_usage` spliced in), usage from bodies and stream events, and
// the definition the proxy serves under /openai. Groq speaks the same dialect and borrows from here.
import { errors } from "../core/errors";
import { addUnpriced, emptyUsage, type Usage, unknownUsageFields } from "../core/usage";
import type {
  StreamObserver,
  StreamUsageRequest,
  UsageContext,
  UsageExtractor,
  UsageInEvent,
  VendorDefinition,
  VendorRoute,
} from "../core/vendor-model";
import { asArray, asObject, asString, count, type JsonObject, parseJson, setIfDefined } from "./json";
import { healthRoutes, JSON_BODY_LIMIT, modelRoutes, UPLOAD_BODY_LIMIT } from "./routes";
import { openAiTranscriptFormat, openAiTranslationFormat } from "./transcripts";

const INCLUDE_USAGE_MEMBER = Buffer.from('"stream_options":{"include_usage":true},');

/**
 * The body with `stream_options.include_usage` set, or undefined when the client asked for usage itself
 * (or sent a `stream_options` the vendor will judge). When the client sent no `stream_options`, the
 * member is spliced in after the opening brace, so the rest of its bytes pass unchanged.
 */
export function withIncludeUsage(body: Uint8Array, json: Record<string, unknown>): Uint8Array | undefined {
  const options = json.stream_options;
  if (options === undefined) {
    const brace = body.indexOf(0x7b) + 1;
    return Buffer.concat([body.subarray(0, brace), INCLUDE_USAGE_MEMBER, body.subarray(brace)]);
  }
  const given = asObject(options);
  if (!given || given.include_usage === true) return undefined;
  return Buffer.from(JSON.stringify({ ...json, stream_options: { ...given, include_usage: true } }));
}

const EMPTY_CHOICES = /"choices"\s*:\s*\[\s*\]/;

/** The chunk `stream_options.include_usage` adds: usage and no choices. */
export function isUsageOnlyChunk(data: string): boolean {
  if (!EMPTY_CHOICES.test(data)) return false;
  return asObject(asObject(parseJson(data))?.usage) !== undefined;
}

const NULL_USAGE = /,\s*"usage"\s*:\s*null/g;

/**
 * With `include_usage`, every other chunk carries `"usage":null`; removed so the client sees the chunks it
 * would have seen without the option. (An unescaped `"usage"` cannot occur inside a JSON string.)
 */
export function withoutNullUsage(data: string): string {
  return data.includes('"usage"') ? data.replace(NULL_USAGE, "") : data;
}

/** OpenAI-style chat streams (OpenAI, Groq): usage asked for with `stream_options.include_usage`. */
export const includeUsage: StreamUsageRequest = {
  ask: withIncludeUsage,
  added: isUsageOnlyChunk,
  withoutAdded: withoutNullUsage,
};

/**
 * Where OpenAI-style streams report usage: a chat or completion chunk's `usage` (null but in the last
 * chunk), or the Responses API's final event's `response.usage`.
 */
export const openAiUsageInEvent: UsageInEvent = (event) =>
  asObject(event.usage) ?? asObject(asObject(event.response)?.usage);

const json = { kind: "json", bodyLimit: JSON_BODY_LIMIT } as const;

/**
 * A response made in the background (`background: true`) is answered `queued`, with no usage; its
 * output and usage come later to a `GET /v1/responses/{id}` the proxy does not serve. Metering charges
 * what a call's answer reports, so the response must be made in the call (streamed or not).
 */
export function answeredInTheCall(field: (name: string) => unknown): void {
  if (field("background") === true) {
    throw errors.invalidField(
      "background",
      "the proxy meters a response as it is answered: make it in the call, streamed or not.",
    );
  }
}

/** Parameters only gpt-image-1 takes: OpenAI runs it, not dall-e-2, when a call without a model sends one. */
const GPT_IMAGE_ONLY = [
  "background",
  "moderation",
  "output_compression",
  "output_format",
  "partial_images",
  "input_fidelity",
];
/** Image generation and edits: dall-e-2 unless a parameter specific to gpt-image-1 is used (OpenAI's API reference). */
const imageDefault = (field: (name: string) => unknown) =>
  GPT_IMAGE_ONLY.some((name) => field(name) !== undefined) ? "gpt-image-1" : "dall-e-2";
const upload = { kind: "multipart", bodyLimit: UPLOAD_BODY_LIMIT, stream: "never" } as const;

/**
 * An audio upload's transcription or translation (OpenAI's and Groq's), with the format its answer is
 * fetched as for the seconds it bills (vendors/transcripts.ts) and any check of its fields.
 */
export function audioRoute(
  operation: "transcription" | "translation",
  usageFormat: NonNullable<VendorRoute["usageFormat"]>,
  check?: VendorRoute["check"],
): VendorRoute {
  return {
    method: "POST",
    path: operation === "transcription" ? "/v1/audio/transcriptions" : "/v1/audio/translations",
    operation,
    ...upload,
    billing: "billable",
    usageFormat,
    ...(check && { check }),
  };
}

export const openAiRoutes: readonly VendorRoute[] = [
  ...healthRoutes("openai"),
  {
    method: "POST",
    path: "/v1/chat/completions",
    operation: "chat",
    ...json,
    stream: "body-flag",
    billing: "billable",
    streamUsage: includeUsage,
    usageInEvent: openAiUsageInEvent,
  },
  {
    method: "POST",
    path: "/v1/completions",
    operation: "completions",
    ...json,
    stream: "body-flag",
    billing: "billable",
    usageInEvent: openAiUsageInEvent,
  },
  {
    method: "POST",
    path: "/v1/responses",
    operation: "responses",
    ...json,
    stream: "body-flag",
    billing: "billable",
    usageInEvent: openAiUsageInEvent,
    check: answeredInTheCall,
  },
  {
    method: "POST",
    path: "/v1/embeddings",
    operation: "embeddings",
    ...json,
    stream: "never",
    billing: "billable",
  },
  ...modelRoutes("/v1/models"),
  audioRoute("transcription", openAiTranscriptFormat),
  audioRoute("translation", openAiTranslationFormat),
  {
    method: "POST",
    path: "/v1/audio/speech",
    operation: "speech",
    kind: "binary-response",
    bodyLimit: JSON_BODY_LIMIT,
    stream: "never",
    billing: "billable",
  },
  {
    method: "POST",
    path: "/v1/images/generations",
    operation: "image",
    ...json,
    stream: "body-flag",
    billing: "billable",
    defaultModel: imageDefault,
  },
  {
    method: "POST",
    path: "/v1/images/edits",
    operation: "image",
    ...upload,
    billing: "billable",
    defaultModel: imageDefault,
  },
  {
    method: "POST",
    path: "/v1/images/variations",
    operation: "image",
    ...upload,
    billing: "billable",
    // Variations are dall-e-2's only.
    defaultModel: () => "dall-e-2",
  },
  {
    method: "POST",
    path: "/v1/moderations",
    operation: "moderation",
    ...json,
    stream: "never",
    billing: "free",
    defaultModel: () => "omni-moderation-latest",
  },
];

/**
 * OpenAI's usage objects in all their spellings: chat and completions (`prompt_tokens`,
 * `completion_tokens`, `*_details`), responses, images and transcriptions (`input_tokens`,
 * `output_tokens`), and whisper's `{"type":"duration","seconds":n}`.
 */
/**
 * The usage fields read below, or known to be subsets priced with their totals (prediction tokens are
 * output; a chat's image tokens are input at the text rate; a transcription's audio tokens are its
 * input) or not billed at all (Groq's timings). Any other count is kept as unpriced.
 */
const KNOWN_FIELDS = new Set([
  "prompt_tokens",
  "completion_tokens",
  "total_tokens",
  "input_tokens",
  "output_tokens",
  "seconds",
  "prompt_tokens_details.cached_tokens",
  "prompt_tokens_details.audio_tokens",
  "prompt_tokens_details.text_tokens",
  "prompt_tokens_details.image_tokens",
  "completion_tokens_details.reasoning_tokens",
  "completion_tokens_details.audio_tokens",
  "completion_tokens_details.text_tokens",
  "completion_tokens_details.accepted_prediction_tokens",
  "completion_tokens_details.rejected_prediction_tokens",
  "input_tokens_details.cached_tokens",
  "input_tokens_details.text_tokens",
  "input_tokens_details.image_tokens",
  "input_token_details.text_tokens",
  "input_token_details.audio_tokens",
  "output_tokens_details.reasoning_tokens",
  "output_tokens_details.text_tokens",
  "output_tokens_details.image_tokens",
  "queue_time",
  "prompt_time",
  "completion_time",
  "total_time",
]);

export function openAiUsage(raw: unknown): Usage {
  const usage = emptyUsage();
  const u = asObject(raw);
  if (!u) return usage;
  const audioIn = count(asObject(u.prompt_tokens_details)?.audio_tokens);
  const audioOut = count(asObject(u.completion_tokens_details)?.audio_tokens);
  // Images API spelling: the image part of an image model's input, billed at its own rate.
  const imageIn = count(asObject(u.input_tokens_details)?.image_tokens);
  if (audioIn > 0) usage.audioInputTokens = audioIn;
  if (audioOut > 0) usage.audioOutputTokens = audioOut;
  if (imageIn > 0) usage.imageInputTokens = imageIn;
  addUnpriced(usage, unknownUsageFields(u, KNOWN_FIELDS));
  usage.inputTokens = count(u.prompt_tokens ?? u.input_tokens);
  usage.outputTokens = count(u.completion_tokens ?? u.output_tokens);
  usage.cachedInputTokens = count(
    asObject(u.prompt_tokens_details)?.cached_tokens ?? asObject(u.input_tokens_details)?.cached_tokens,
  );
  usage.reasoningTokens = count(
    asObject(u.completion_tokens_details)?.reasoning_tokens ??
      asObject(u.output_tokens_details)?.reasoning_tokens,
  );
  if (u.type === "duration") usage.audioSeconds = count(u.seconds);
  return usage;
}

/** Usage we could not read from the vendor: zero figures, marked estimated so nobody takes them as billed. */
function unreported(): Usage {
  return { ...emptyUsage(), estimated: true };
}

/**
 * What the response says beyond `usage`: the service tier that served it, and the web searches a
 * Responses call ran (one `web_search_call` output item each), named after the tool the request
 * offered (`web_search_preview` is priced apart on some models).
 */
function withResponseFacts(usage: Usage, context: UsageContext, response: JsonObject | undefined): Usage {
  const tier = asString(response?.service_tier);
  if (tier !== undefined) usage.serviceTier = tier;
  const searches = asArray(response?.output).filter(
    (item) => asObject(item)?.type === "web_search_call",
  ).length;
  if (searches > 0) {
    const preview = asArray(context.request?.tools).some((tool) =>
      asString(asObject(tool)?.type)?.startsWith("web_search_preview"),
    );
    usage.toolCalls = { [preview ? "web_search_preview" : "web_search"]: searches };
  }
  return usage;
}

function fromResponse(context: UsageContext, body: unknown): Usage {
  const response = asObject(body);
  switch (context.operation) {
    case "chat":
    case "completions":
    case "embeddings":
    case "responses":
      return withResponseFacts(
        response?.usage ? openAiUsage(response.usage) : unreported(),
        context,
        response,
      );
    case "transcription":
    case "translation": {
      if (response?.usage) return openAiUsage(response.usage);
      // verbose_json reports the audio's duration; text, srt and vtt formats report nothing.
      const seconds = response?.duration;
      return typeof seconds === "number" ? { ...emptyUsage(), audioSeconds: count(seconds) } : unreported();
    }
    case "speech":
      // The vendor reports nothing for speech; the characters we sent are what it bills.
      return {
        ...emptyUsage(),
        speechCharacters: [...(asString(context.request?.input) ?? "")].length,
        estimated: true,
      };
    case "image": {
      const usage = response?.usage ? openAiUsage(response.usage) : emptyUsage();
      usage.images = asArray(response?.data).length;
      return usage;
    }
    default:
      return emptyUsage();
  }
}

/** Where a stream chunk carries its usage: `usage` for OpenAI, also `x_groq.usage` for Groq. */
export type StreamUsageOf = (chunk: JsonObject) => unknown;

interface ChoiceState {
  index: number;
  role: string;
  content: string;
  refusal: string;
  text: string;
  finishReason: unknown;
  toolCalls: JsonObject[];
}

/**
 * Observes an OpenAI-style stream: chat chunks, completions chunks, responses events, transcription
 * events. Keeps the last usage seen and assembles the final message the client effectively received.
 */
class OpenAiStreamObserver implements StreamObserver {
  private usage: Usage | undefined;
  private readonly head: JsonObject = {};
  private readonly choices = new Map<number, ChoiceState>();
  private final: JsonObject | undefined;
  private text = "";
  /** Function-call arguments a Responses stream delivered. */
  private argumentsText = "";
  private images = 0;

  constructor(
    private readonly context: UsageContext,
    private readonly usageOf: StreamUsageOf,
  ) {}

  event(data: string): void {
    if (data === "[DONE]") return;
    const chunk = asObject(parseJson(data));
    if (!chunk) return;
    const usage = this.usageOf(chunk);
    if (asObject(usage)) this.usage = openAiUsage(usage);
    switch (this.context.operation) {
      case "chat":
      case "completions":
        this.onChoices(chunk);
        break;
      case "responses":
        this.onResponsesEvent(chunk);
        break;
      default:
        this.onOtherEvent(chunk);
    }
  }

  private onChoices(chunk: JsonObject): void {
    for (const key of ["id", "created", "model", "system_fingerprint", "service_tier"]) {
      if (this.head[key] === undefined) setIfDefined(this.head, key, chunk[key]);
    }
    for (const raw of asArray(chunk.choices)) {
      const choice = asObject(raw);
      if (!choice) continue;
      const index = count(choice.index);
      let state = this.choices.get(index);
      if (!state) {
        state = {
          index,
          role: "assistant",
          content: "",
          refusal: "",
          text: "",
          finishReason: null,
          toolCalls: [],
        };
        this.choices.set(index, state);
      }
      if (choice.finish_reason != null) state.finishReason = choice.finish_reason;
      if (typeof choice.text === "string") state.text += choice.text;
      const delta = asObject(choice.delta);
      if (!delta) continue;
      if (typeof delta.role === "string") state.role = delta.role;
      if (typeof delta.content === "string") state.content += delta.content;
      if (typeof delta.refusal === "string") state.refusal += delta.refusal;
      for (const rawCall of asArray(delta.tool_calls)) addToolCallDelta(state.toolCalls, asObject(rawCall));
    }
  }

  private onResponsesEvent(chunk: JsonObject): void {
    const response = asObject(chunk.response);
    if (response) {
      this.final = response;
      if (response.usage) this.usage = openAiUsage(response.usage);
    }
    if (typeof chunk.delta !== "string") return;
    if (chunk.type === "response.output_text.delta") this.text += chunk.delta;
    if (chunk.type === "response.function_call_arguments.delta") this.argumentsText += chunk.delta;
  }

  private onOtherEvent(chunk: JsonObject): void {
    const type = asString(chunk.type) ?? "";
    if (type === "transcript.text.delta" && typeof chunk.delta === "string") this.text += chunk.delta;
    if (type === "transcript.text.done" && typeof chunk.text === "string") this.text = chunk.text;
    if (type.endsWith(".completed") && this.context.operation === "image") this.images++;
  }

  result(complete: boolean): { usage: Usage; message: unknown; text: string } {
    const usage = this.usage ?? unreported();
    if (this.context.operation === "image") usage.images = this.images;
    withResponseFacts(usage, this.context, this.final ?? this.head);
    usage.complete = complete;
    return { usage, message: this.message(), text: this.deliveredText() };
  }

  /** The text the client received: content, refusals and tool-call arguments, without any wrapper. */
  private deliveredText(): string {
    let text = this.text + this.argumentsText;
    for (const choice of this.choices.values()) {
      text += choice.content + choice.refusal + choice.text;
      for (const call of choice.toolCalls) {
        const fn = asObject(call.function);
        text += (asString(fn?.name) ?? "") + (asString(fn?.arguments) ?? "");
      }
    }
    return text;
  }

  private message(): unknown {
    switch (this.context.operation) {
      case "chat":
        return {
          ...this.head,
          object: "chat.completion",
          choices: [...this.choices.values()].map((c) => {
            const message: JsonObject = { role: c.role, content: c.content };
            if (c.refusal) message.refusal = c.refusal;
            if (c.toolCalls.length > 0) message.tool_calls = c.toolCalls;
            return { index: c.index, message, finish_reason: c.finishReason };
          }),
        };
      case "completions":
        return {
          ...this.head,
          object: "text_completion",
          choices: [...this.choices.values()].map((c) => ({
            index: c.index,
            text: c.text,
            finish_reason: c.finishReason,
          })),
        };
      case "responses":
        return this.final?.status === "completed" ? this.final : { ...this.final, output_text: this.text };
      default:
        return this.text ? { text: this.text } : undefined;
    }
  }
}

/** Tool calls stream as fragments keyed by index: the first names the call, later ones extend its arguments. */
function addToolCallDelta(calls: JsonObject[], delta: JsonObject | undefined): void {
  if (!delta) return;
  const index = count(delta.index);
  let call = calls[index];
  if (!call) {
    call = { id: delta.id, type: delta.type ?? "function", function: { name: "", arguments: "" } };
    calls[index] = call;
  }
  if (typeof delta.id === "string") call.id = delta.id;
  const fn = asObject(delta.function);
  const target = call.function as { name: string; arguments: string };
  if (typeof fn?.name === "string") target.name += fn.name;
  if (typeof fn?.arguments === "string") target.arguments += fn.arguments;
}

export function openAiStyleUsage(usageOf: StreamUsageOf): UsageExtractor {
  return {
    fromResponse,
    stream: (context) => new OpenAiStreamObserver(context, usageOf),
  };
}

export const openAiUsageExtractor = openAiStyleUsage((chunk) => chunk.usage);

/** Request headers of OpenAI's API that clients legitimately set. */
export const OPENAI_REQUEST_HEADERS = ["openai-organization", "openai-project", "openai-beta"] as const;

export const openai: VendorDefinition = {
  name: "openai",
  defaultUpstream: "https://api.openai.com",
  routes: openAiRoutes,
  authHeaders: (vendorKey) => ({ authorization: `Bearer ${vendorKey}` }),
  requestHeaders: OPENAI_REQUEST_HEADERS,
  usage: openAiUsageExtractor,
};
