/**
 * OpenAI's wire formats, and Groq's (the same API under `/openai`, with `x_groq` extras and its own
 * usage fields and error texts).
 */
import { parseMultipart } from "./multipart";
import {
  dataEvent,
  jsonReply,
  namedEvent,
  optionalLimit,
  readJson,
  requireString,
  type SimState,
  SimulatedError,
  streamReply,
  textReply,
  unixSeconds,
} from "./reply";
import {
  embeddingVector,
  estimateTokens,
  float32Base64,
  type Generation,
  generate,
  REASONING_TOKENS,
  sumTokens,
  textsOf,
} from "./text";
import { openAiUsageReport } from "./usage-report";
import type { Route, VendorSim } from "./vendor";

type Flavour = "openai" | "groq";

/** OpenAI caches prompts of at least 1024 tokens, in steps of 128, from the second identical request on. */
const PROMPT_CACHE_MIN_TOKENS = 1024;
const PROMPT_CACHE_STEP = 128;
/** 128 kbit/s audio: the duration a simulated transcription bills for an upload. */
const AUDIO_BYTES_PER_SECOND = 16_000;
/** gpt-4o-transcribe style audio tokens per second of audio. */
const AUDIO_TOKENS_PER_SECOND = 10;
const SPEECH_BYTES_PER_CHARACTER = 256;
const SPEECH_CHUNK_BYTES = 16 * 1024;
/** Tokens billed for each input image of an image edit. */
const IMAGE_INPUT_TOKENS = 258;
/** A valid 1x1 PNG: every simulated image. */
const PNG_1X1 =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=";

function isReasoningModel(model: string): boolean {
  return /^(o\d|gpt-5)|gpt-oss|deepseek-r1|qwen3|reasoning/.test(model);
}

function cachedTokens(state: SimState, prompt: string, promptTokens: number): number {
  if (promptTokens < PROMPT_CACHE_MIN_TOKENS || !state.seenBefore(prompt)) return 0;
  return Math.floor(promptTokens / PROMPT_CACHE_STEP) * PROMPT_CACHE_STEP;
}

interface Prompt {
  parts: string[];
  /** The last user text: what the reply echoes. */
  seed: string;
  tokens: number;
  cached: number;
}

function promptOf(state: SimState, parts: string[], seed: string): Prompt {
  const tokens = sumTokens(parts);
  return { parts, seed, tokens, cached: cachedTokens(state, parts.join("\n"), tokens) };
}

function lastUserText(items: unknown[]): string {
  for (let i = items.length - 1; i >= 0; i--) {
    const item = items[i] as { role?: unknown; content?: unknown } | null;
    if (item?.role === "user") return textsOf(item.content).join(" ");
  }
  return textsOf(items).join(" ");
}

function chatUsage(flavour: Flavour, prompt: Prompt, gen: Generation): Record<string, unknown> {
  const completion = gen.textTokens + gen.reasoningTokens;
  if (flavour === "groq") {
    const promptTime = prompt.tokens / 100_000;
    const completionTime = completion / 1_000;
    return {
      queue_time: 0.0001,
      prompt_tokens: prompt.tokens,
      prompt_time: promptTime,
      completion_tokens: completion,
      completion_time: completionTime,
      total_tokens: prompt.tokens + completion,
      total_time: promptTime + completionTime,
      ...(prompt.cached > 0 ? { prompt_tokens_details: { cached_tokens: prompt.cached } } : {}),
      ...(gen.reasoningTokens > 0
        ? { completion_tokens_details: { reasoning_tokens: gen.reasoningTokens } }
        : {}),
    };
  }
  return {
    prompt_tokens: prompt.tokens,
    completion_tokens: completion,
    total_tokens: prompt.tokens + completion,
    prompt_tokens_details: { cached_tokens: prompt.cached, audio_tokens: 0 },
    completion_tokens_details: {
      reasoning_tokens: gen.reasoningTokens,
      audio_tokens: 0,
      accepted_prediction_tokens: 0,
      rejected_prediction_tokens: 0,
    },
  };
}

/** The tier that served a request, as OpenAI reports it: the one asked for (`fast` is `priority`), else `default`. */
/** A completion's tokens, for the organization usage report (usage-report.ts). */
function served(state: SimState, model: string, prompt: Prompt, output: number): void {
  state.usage.add("openai", {
    model,
    uncachedInput: prompt.tokens - prompt.cached,
    cachedInput: prompt.cached,
    output,
  });
}

function servedTier(body: Record<string, unknown>): string {
  const asked = body.service_tier;
  if (asked === "flex" || asked === "priority") return asked;
  return asked === "fast" ? "priority" : "default";
}

function includeUsage(body: Record<string, unknown>): boolean {
  const options = body.stream_options as { include_usage?: unknown } | undefined;
  return options?.include_usage === true;
}

function chatCompletions(flavour: Flavour): Route {
  return (req, state) => {
    const body = readJson(req);
    const model = requireString(body, "model");
    const messages = body.messages;
    if (!Array.isArray(messages) || messages.length === 0) {
      throw new SimulatedError(400, "messages: Field required", "missing_field");
    }
    const prompt = promptOf(
      state,
      messages.flatMap((m) => textsOf((m as { content?: unknown } | null)?.content)),
      lastUserText(messages),
    );
    const limit = optionalLimit(body, "max_completion_tokens", "max_tokens");
    const gen = generate(prompt.seed, limit, isReasoningModel(model) ? REASONING_TOKENS : 0);
    const usage = chatUsage(flavour, prompt, gen);
    if (flavour === "openai") served(state, model, prompt, gen.textTokens + gen.reasoningTokens);
    const id = state.nextId("chatcmpl-");
    const created = unixSeconds();
    const finishReason = gen.truncated ? "length" : "stop";
    const tier = flavour === "groq" ? {} : { service_tier: servedTier(body) };
    const common = { id, created, model, system_fingerprint: "fp_simulated", ...tier };

    if (body.stream !== true) {
      return jsonReply({
        ...common,
        object: "chat.completion",
        choices: [
          {
            index: 0,
            message: { role: "assistant", content: gen.text, refusal: null, annotations: [] },
            logprobs: null,
            finish_reason: finishReason,
          },
        ],
        usage,
        ...(flavour === "groq" ? { x_groq: { id: req.requestId } } : {}),
      });
    }

    const withUsage = includeUsage(body);
    const chunk = (
      delta: Record<string, unknown>,
      finish: string | null,
      extra: Record<string, unknown> = {},
    ) =>
      dataEvent({
        ...common,
        object: "chat.completion.chunk",
        choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
        // OpenAI marks every chunk `usage: null` when the final usage chunk will follow.
        ...(withUsage && flavour === "openai" ? { usage: null } : {}),
        ...extra,
      });
    const chunks = [
      chunk(
        { role: "assistant", content: "" },
        null,
        flavour === "groq" ? { x_groq: { id: req.requestId } } : {},
      ),
      ...gen.pieces.map((piece) => chunk({ content: piece }, null)),
      chunk({}, finishReason, flavour === "groq" ? { x_groq: { id: req.requestId, usage } } : {}),
    ];
    if (withUsage) {
      chunks.push(dataEvent({ ...common, object: "chat.completion.chunk", choices: [], usage }));
    }
    chunks.push("data: [DONE]\n\n");
    return streamReply(chunks);
  };
}

const completions: Route = (req, state) => {
  const body = readJson(req);
  const model = requireString(body, "model");
  const raw = body.prompt;
  const items = Array.isArray(raw) ? raw : [raw ?? ""];
  const texts = items.filter((item): item is string => typeof item === "string");
  // Prompts given as token ids count one token per id.
  const idTokens = items.reduce<number>(
    (sum, item) => sum + (typeof item === "number" ? 1 : Array.isArray(item) ? item.length : 0),
    0,
  );
  const tokens = sumTokens(texts) + idTokens;
  const prompt: Prompt = {
    parts: texts,
    seed: texts.at(-1) ?? "",
    tokens,
    cached: cachedTokens(state, texts.join("\n"), tokens),
  };
  const gen = generate(prompt.seed, optionalLimit(body, "max_tokens") ?? 16, 0);
  const usage = chatUsage("openai", prompt, gen);
  served(state, model, prompt, gen.textTokens + gen.reasoningTokens);
  const id = state.nextId("cmpl-");
  const created = unixSeconds();
  const finishReason = gen.truncated ? "length" : "stop";
  const common = { id, object: "text_completion", created, model, system_fingerprint: "fp_simulated" };
  if (body.stream !== true) {
    return jsonReply({
      ...common,
      choices: [{ text: gen.text, index: 0, logprobs: null, finish_reason: finishReason }],
      usage,
    });
  }
  const chunk = (text: string, finish: string | null) =>
    dataEvent({ ...common, choices: [{ text, index: 0, logprobs: null, finish_reason: finish }] });
  const chunks = [...gen.pieces.map((piece) => chunk(piece, null)), chunk("", finishReason)];
  if (includeUsage(body)) chunks.push(dataEvent({ ...common, choices: [], usage }));
  chunks.push("data: [DONE]\n\n");
  return streamReply(chunks);
};

const embeddings: Route = (req) => {
  const body = readJson(req);
  const model = requireString(body, "model");
  const raw = body.input;
  if (raw === undefined || raw === null || raw === "") {
    throw new SimulatedError(400, "input: Field required", "missing_field");
  }
  // A list of strings or of token-id lists is a batch; a single string or token-id list is one input.
  const inputs: unknown[] = Array.isArray(raw) && raw.some((item) => typeof item !== "number") ? raw : [raw];
  const dimensions =
    typeof body.dimensions === "number" ? body.dimensions : model.includes("3-large") ? 3072 : 1536;
  const base64 = body.encoding_format === "base64";
  let promptTokens = 0;
  const data = inputs.map((input, index) => {
    const text = Array.isArray(input) ? input.join(" ") : String(input);
    promptTokens += Array.isArray(input) ? input.length : estimateTokens(text);
    const vector = embeddingVector(text, dimensions);
    return { object: "embedding", index, embedding: base64 ? float32Base64(vector) : vector };
  });
  return jsonReply({
    object: "list",
    data,
    model,
    usage: { prompt_tokens: promptTokens, total_tokens: promptTokens },
  });
};

const OPENAI_MODELS = [
  "gpt-4o",
  "gpt-4o-mini",
  "gpt-4.1",
  "gpt-5",
  "o4-mini",
  "text-embedding-3-small",
  "text-embedding-3-large",
  "whisper-1",
  "gpt-4o-transcribe",
  "tts-1",
  "gpt-4o-mini-tts",
  "dall-e-3",
  "gpt-image-1",
  "omni-moderation-latest",
];
const GROQ_MODELS = [
  "llama-3.1-8b-instant",
  "llama-3.3-70b-versatile",
  "openai/gpt-oss-20b",
  "openai/gpt-oss-120b",
  "qwen/qwen3-32b",
];
const MODELS_CREATED = 1_700_000_000;

function models(flavour: Flavour): Route {
  return () =>
    jsonReply({
      object: "list",
      data:
        flavour === "groq"
          ? GROQ_MODELS.map((id) => ({
              id,
              object: "model",
              created: MODELS_CREATED,
              owned_by: id.split("/")[0] === id ? "Meta" : id.split("/")[0],
              active: true,
              context_window: 131_072,
              public_apps: null,
              max_completion_tokens: 32_768,
            }))
          : OPENAI_MODELS.map((id) => ({ id, object: "model", created: MODELS_CREATED, owned_by: "system" })),
    });
}

const TRANSCRIPT_WORDS = ["simulated", "transcript", "of", "the", "uploaded", "audio"];

function audio(task: "transcribe" | "translate"): Route {
  return (req) => {
    const form = parseMultipart(req.headers["content-type"], req.body);
    const file = form.files.find((f) => f.field === "file");
    if (!file) throw new SimulatedError(400, "file: Field required", "missing_field");
    const model = form.fields.get("model");
    if (!model) throw new SimulatedError(400, "model: Field required", "missing_field");
    const format = form.fields.get("response_format") ?? "json";
    const seconds = Math.max(1, Math.ceil(file.size / AUDIO_BYTES_PER_SECOND));
    const wordCount = Math.min(200, seconds * 2);
    const words = Array.from({ length: wordCount }, (_, i) => TRANSCRIPT_WORDS[i % TRANSCRIPT_WORDS.length]);
    const text = words.join(" ");
    const promptTokens = estimateTokens(form.fields.get("prompt") ?? "");
    const audioTokens = seconds * AUDIO_TOKENS_PER_SECOND;
    // whisper bills by duration, the gpt-4o transcribers by tokens; translations report no usage.
    const usage =
      task === "translate"
        ? undefined
        : model.startsWith("whisper")
          ? { type: "duration", seconds }
          : {
              type: "tokens",
              input_tokens: promptTokens + audioTokens,
              input_token_details: { text_tokens: promptTokens, audio_tokens: audioTokens },
              output_tokens: wordCount,
              total_tokens: promptTokens + audioTokens + wordCount,
            };
    const timestamp = (s: number, separator: string) =>
      `00:${String(Math.floor(s / 60)).padStart(2, "0")}:${String(s % 60).padStart(2, "0")}${separator}000`;
    switch (format) {
      case "json":
        return jsonReply(usage ? { text, usage } : { text });
      case "text":
        return textReply(`${text}\n`);
      case "verbose_json":
        return jsonReply({
          task,
          language: "english",
          duration: seconds,
          text,
          segments: [
            {
              id: 0,
              seek: 0,
              start: 0,
              end: seconds,
              text,
              tokens: [],
              temperature: 0,
              avg_logprob: -0.1,
              compression_ratio: 1,
              no_speech_prob: 0,
            },
          ],
          ...(task === "transcribe" ? { usage: { type: "duration", seconds } } : {}),
        });
      case "srt":
        return textReply(`1\n${timestamp(0, ",")} --> ${timestamp(seconds, ",")}\n${text}\n\n`);
      case "vtt":
        return textReply(
          `WEBVTT\n\n${timestamp(0, ".")} --> ${timestamp(seconds, ".")}\n${text}\n\n`,
          "text/vtt",
        );
      default:
        throw new SimulatedError(400, `response_format '${format}' is not supported.`, "invalid_value");
    }
  };
}

const SPEECH_CONTENT_TYPES: Record<string, string> = {
  mp3: "audio/mpeg",
  opus: "audio/opus",
  aac: "audio/aac",
  flac: "audio/flac",
  wav: "audio/wav",
  pcm: "audio/pcm",
};

const speech: Route = (req) => {
  const body = readJson(req);
  requireString(body, "model");
  requireString(body, "voice");
  const input = requireString(body, "input");
  const format = typeof body.response_format === "string" ? body.response_format : "mp3";
  const contentType = SPEECH_CONTENT_TYPES[format];
  if (!contentType)
    throw new SimulatedError(400, `response_format '${format}' is not supported.`, "invalid_value");
  // Audio length follows the text; the bytes are a deterministic pattern, streamed like the vendor does.
  const audioBytes = Buffer.alloc(input.length * SPEECH_BYTES_PER_CHARACTER);
  for (let i = 0; i < audioBytes.length; i++)
    audioBytes[i] = (i * 31 + input.charCodeAt(i % input.length)) & 0xff;
  const chunks: Buffer[] = [];
  for (let at = 0; at < audioBytes.length; at += SPEECH_CHUNK_BYTES) {
    chunks.push(audioBytes.subarray(at, at + SPEECH_CHUNK_BYTES));
  }
  return { status: 200, headers: { "content-type": contentType }, chunks };
};

/** gpt-image-1 output tokens per image, by quality, for square and for tall/wide sizes. */
const IMAGE_OUTPUT_TOKENS: Record<string, [number, number]> = {
  low: [272, 408],
  medium: [1056, 1584],
  high: [4160, 6240],
};

function images(kind: "generations" | "edits" | "variations"): Route {
  return (req) => {
    let fields: Map<string, string>;
    let inputImages = 0;
    if (kind === "generations") {
      const body = readJson(req);
      fields = new Map(
        Object.entries(body).map(([key, value]) => [
          key,
          typeof value === "string" ? value : JSON.stringify(value),
        ]),
      );
    } else {
      const form = parseMultipart(req.headers["content-type"], req.body);
      fields = form.fields;
      inputImages = form.files.filter((f) => f.field === "image" || f.field === "image[]").length;
      if (inputImages === 0) throw new SimulatedError(400, "image: Field required", "missing_field");
    }
    const prompt = fields.get("prompt") ?? "";
    if (kind !== "variations" && prompt === "") {
      throw new SimulatedError(400, "prompt: Field required", "missing_field");
    }
    const model = fields.get("model") ?? "dall-e-2";
    const n = Number.parseInt(fields.get("n") ?? "1", 10);
    if (!Number.isInteger(n) || n < 1 || n > 10) throw new SimulatedError(400, "n must be between 1 and 10.");
    const gptImage = model.startsWith("gpt-image");
    const requestedSize = fields.get("size") ?? "1024x1024";
    const size = requestedSize === "auto" ? "1024x1024" : requestedSize;
    const b64 = gptImage || fields.get("response_format") === "b64_json";
    const data = Array.from({ length: n }, () =>
      b64
        ? { b64_json: PNG_1X1 }
        : {
            // A data URL, so that a client can fetch the image offline.
            url: `data:image/png;base64,${PNG_1X1}`,
            ...(model === "dall-e-3" ? { revised_prompt: prompt } : {}),
          },
    );
    if (!gptImage) return jsonReply({ created: unixSeconds(), data });
    const requestedQuality = fields.get("quality") ?? "auto";
    const quality = requestedQuality in IMAGE_OUTPUT_TOKENS ? requestedQuality : "medium";
    const perImage = (IMAGE_OUTPUT_TOKENS[quality] as [number, number])[size === "1024x1024" ? 0 : 1];
    const textTokens = estimateTokens(prompt);
    const imageTokens = inputImages * IMAGE_INPUT_TOKENS;
    const outputTokens = perImage * n;
    return jsonReply({
      created: unixSeconds(),
      background: "opaque",
      data,
      output_format: "png",
      quality,
      size,
      usage: {
        input_tokens: textTokens + imageTokens,
        input_tokens_details: { text_tokens: textTokens, image_tokens: imageTokens },
        output_tokens: outputTokens,
        total_tokens: textTokens + imageTokens + outputTokens,
      },
    });
  };
}

const MODERATION_CATEGORIES = [
  "harassment",
  "harassment/threatening",
  "hate",
  "hate/threatening",
  "illicit",
  "illicit/violent",
  "self-harm",
  "self-harm/intent",
  "self-harm/instructions",
  "sexual",
  "sexual/minors",
  "violence",
  "violence/graphic",
];

const moderations: Route = (req, state) => {
  const body = readJson(req);
  const input = body.input;
  if (input === undefined || input === null)
    throw new SimulatedError(400, "input: Field required", "missing_field");
  const model = typeof body.model === "string" ? body.model : "omni-moderation-latest";
  // A list of strings is a batch; a list of text/image parts is one multimodal input.
  const count = Array.isArray(input) && input.every((item) => typeof item === "string") ? input.length : 1;
  const flags = Object.fromEntries(MODERATION_CATEGORIES.map((c) => [c, false]));
  const scores = Object.fromEntries(MODERATION_CATEGORIES.map((c) => [c, 0.000001]));
  const applied = Object.fromEntries(MODERATION_CATEGORIES.map((c) => [c, ["text"]]));
  return jsonReply({
    id: state.nextId("modr-"),
    model,
    results: Array.from({ length: count }, () => ({
      flagged: false,
      categories: flags,
      category_scores: scores,
      ...(model.startsWith("omni") ? { category_applied_input_types: applied } : {}),
    })),
  });
};

function responseInputTexts(input: unknown): { parts: string[]; seed: string } {
  if (typeof input === "string") return { parts: [input], seed: input };
  if (Array.isArray(input)) return { parts: textsOf(input), seed: lastUserText(input) };
  return { parts: [], seed: "" };
}

const responses: Route = (req, state) => {
  const body = readJson(req);
  const model = requireString(body, "model");
  if (body.input === undefined && body.previous_response_id === undefined) {
    throw new SimulatedError(400, "input: Field required", "missing_field");
  }
  const input = responseInputTexts(body.input);
  const instructions = typeof body.instructions === "string" ? body.instructions : null;
  const prompt = promptOf(
    state,
    instructions === null ? input.parts : [instructions, ...input.parts],
    input.seed,
  );
  const limit = optionalLimit(body, "max_output_tokens");
  const reasoning = isReasoningModel(model);
  const gen = generate(prompt.seed, limit, reasoning ? REASONING_TOKENS : 0);
  const outputTokens = gen.textTokens + gen.reasoningTokens;
  served(state, model, prompt, outputTokens);
  const usage = {
    input_tokens: prompt.tokens,
    input_tokens_details: { cached_tokens: prompt.cached },
    output_tokens: outputTokens,
    output_tokens_details: { reasoning_tokens: gen.reasoningTokens },
    total_tokens: prompt.tokens + outputTokens,
  };
  const status = gen.truncated ? "incomplete" : "completed";
  const reasoningItem = reasoning ? { id: state.nextId("rs_"), type: "reasoning", summary: [] } : undefined;
  const messageId = state.nextId("msg_");
  const part = (text: string) => ({ type: "output_text", text, annotations: [], logprobs: [] });
  const message = (itemStatus: string, content: unknown[]) => ({
    id: messageId,
    type: "message",
    status: itemStatus,
    role: "assistant",
    content,
  });
  const finalMessage = message(status, [part(gen.text)]);
  const responseId = state.nextId("resp_");
  const createdAt = unixSeconds();
  const response = (responseStatus: string, output: unknown[], responseUsage: unknown) => ({
    id: responseId,
    object: "response",
    created_at: createdAt,
    status: responseStatus,
    background: false,
    error: null,
    incomplete_details: responseStatus === "incomplete" ? { reason: "max_output_tokens" } : null,
    instructions,
    max_output_tokens: limit ?? null,
    model,
    output,
    parallel_tool_calls: true,
    previous_response_id: body.previous_response_id ?? null,
    reasoning: { effort: reasoning ? "medium" : null, summary: null },
    service_tier: servedTier(body),
    store: body.store ?? true,
    temperature: typeof body.temperature === "number" ? body.temperature : 1,
    text: { format: { type: "text" } },
    tool_choice: "auto",
    tools: [],
    top_p: typeof body.top_p === "number" ? body.top_p : 1,
    truncation: "disabled",
    usage: responseUsage,
    user: null,
    metadata: {},
  });
  const finalOutput = reasoningItem ? [reasoningItem, finalMessage] : [finalMessage];
  if (body.stream !== true) return jsonReply(response(status, finalOutput, usage));

  let sequence = 0;
  const event = (value: { type: string } & Record<string, unknown>) =>
    namedEvent({ ...value, sequence_number: sequence++ });
  const outputIndex = reasoningItem ? 1 : 0;
  const at = { item_id: messageId, output_index: outputIndex, content_index: 0 };
  const chunks = [
    event({ type: "response.created", response: response("in_progress", [], null) }),
    event({ type: "response.in_progress", response: response("in_progress", [], null) }),
  ];
  if (reasoningItem) {
    chunks.push(
      event({ type: "response.output_item.added", output_index: 0, item: reasoningItem }),
      event({ type: "response.output_item.done", output_index: 0, item: reasoningItem }),
    );
  }
  chunks.push(
    event({
      type: "response.output_item.added",
      output_index: outputIndex,
      item: message("in_progress", []),
    }),
    event({ type: "response.content_part.added", ...at, part: part("") }),
    ...gen.pieces.map((delta) => event({ type: "response.output_text.delta", ...at, delta, logprobs: [] })),
    event({ type: "response.output_text.done", ...at, text: gen.text, logprobs: [] }),
    event({ type: "response.content_part.done", ...at, part: part(gen.text) }),
    event({ type: "response.output_item.done", output_index: outputIndex, item: finalMessage }),
    event({ type: `response.${status}`, response: response(status, finalOutput, usage) }),
  );
  return streamReply(chunks);
};

function routesOf(flavour: Flavour): Map<string, Route> {
  const shared: [string, Route][] = [
    ["POST /v1/chat/completions", chatCompletions(flavour)],
    ["POST /v1/responses", responses],
    ["GET /v1/models", models(flavour)],
  ];
  if (flavour === "groq") return new Map(shared);
  return new Map([
    ...shared,
    ["POST /v1/completions", completions],
    ["POST /v1/embeddings", embeddings],
    ["POST /v1/audio/transcriptions", audio("transcribe")],
    ["POST /v1/audio/translations", audio("translate")],
    ["POST /v1/audio/speech", speech],
    ["POST /v1/images/generations", images("generations")],
    ["POST /v1/images/edits", images("edits")],
    ["POST /v1/images/variations", images("variations")],
    ["POST /v1/moderations", moderations],
    ["GET /v1/organization/usage/completions", openAiUsageReport],
  ]);
}

function errorType(flavour: Flavour, status: number): string {
  if (status === 429) return flavour === "groq" ? "tokens" : "requests";
  if (status >= 500) return flavour === "groq" ? "internal_server_error" : "server_error";
  return "invalid_request_error";
}

function defaultCode(status: number): string | null {
  if (status === 401) return "invalid_api_key";
  if (status === 429) return "rate_limit_exceeded";
  return null;
}

export function openAiFamily(flavour: Flavour): VendorSim {
  const routes = routesOf(flavour);
  return {
    authenticate(req) {
      if (/^Bearer\s+\S/i.test(req.headers.authorization ?? "")) return undefined;
      return flavour === "groq"
        ? new SimulatedError(401, "Invalid API Key", "invalid_api_key")
        : new SimulatedError(
            401,
            "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
          );
    },
    route: (req) => routes.get(`${req.method} ${req.path}`),
    notFound: (req) =>
      flavour === "groq"
        ? new SimulatedError(
            404,
            `Unknown request URL: ${req.method} /openai${req.path}. Please check the URL for typos, or see the docs at https://console.groq.com/docs/`,
            "unknown_url",
          )
        : new SimulatedError(404, `Invalid URL (${req.method} ${req.path})`),
    errorReply(error) {
      const code = error.code ?? defaultCode(error.status);
      const body =
        flavour === "groq"
          ? {
              error: {
                message: error.message,
                type: errorType(flavour, error.status),
                ...(code ? { code } : {}),
              },
            }
          : { error: { message: error.message, type: errorType(flavour, error.status), param: null, code } };
      return jsonReply(body, error.status);
    },
    headers: (req) => ({ "x-request-id": req.requestId }),
  };
}
