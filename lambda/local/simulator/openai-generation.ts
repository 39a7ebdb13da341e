/**
 * OpenAI's text generation endpoints, as OpenAI and Groq serve them: chat completions, legacy
 * completions and responses, streamed or whole, with the usage each flavour reports.
 */
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
  unixSeconds,
} from "./reply";
import { type Generation, generate, REASONING_TOKENS, sumTokens, textsOf } from "./text";
import type { Route } from "./vendor";

/** OpenAI's API as OpenAI serves it, or as Groq does (`x_groq` extras, its own usage fields and errors). */
export type Flavour = "openai" | "groq";

/** OpenAI caches prompts of at least 1024 tokens, in steps of 128, from the second identical request on. */
const PROMPT_CACHE_MIN_TOKENS = 1024;
const PROMPT_CACHE_STEP = 128;

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

/** A completion's tokens, for the organization usage report (usage-report.ts). */
function served(state: SimState, model: string, prompt: Prompt, output: number): void {
  state.usage.add("openai", {
    model,
    uncachedInput: prompt.tokens - prompt.cached,
    cachedInput: prompt.cached,
    output,
  });
}

/** The tier that served a request, as OpenAI reports it: the one asked for (`fast` is `priority`), else `default`. */
function servedTier(body: Record<string, unknown>): string {
  const asked = body.service_tier;
  if (asked === "flex" || asked === "priority") return asked;
  return asked === "fast" ? "priority" : "default";
}

function includeUsage(body: Record<string, unknown>): boolean {
  const options = body.stream_options as { include_usage?: unknown } | undefined;
  return options?.include_usage === true;
}

export function chatCompletions(flavour: Flavour): Route {
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

export const completions: Route = (req, state) => {
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

function responseInputTexts(input: unknown): { parts: string[]; seed: string } {
  if (typeof input === "string") return { parts: [input], seed: input };
  if (Array.isArray(input)) return { parts: textsOf(input), seed: lastUserText(input) };
  return { parts: [], seed: "" };
}

export const responses: Route = (req, state) => {
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
