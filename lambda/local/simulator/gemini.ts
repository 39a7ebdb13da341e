/** Gemini's (generativelanguage.googleapis.com) wire formats, under both /v1 and /v1beta. */
import {
  jsonReply,
  type Reply,
  readJson,
  requireString,
  type SimRequest,
  type SimState,
  SimulatedError,
  streamReply,
  unixSeconds,
} from "./reply";
import { embeddingVector, generate, REASONING_TOKENS, sumTokens, textsOf } from "./text";
import type { Route, VendorSim } from "./vendor";

const JSON_TYPE = "application/json; charset=UTF-8";
const MODEL_ROUTE = /^\/(v1|v1beta)\/models\/([A-Za-z0-9._-]+):([A-Za-z]+)$/;
const MODELS_ROUTE = /^\/(v1|v1beta)\/models$/;
const CACHED_CONTENTS_ROUTE = "/v1beta/cachedContents";

function json(value: unknown): Reply {
  return jsonReply(value, 200, JSON_TYPE);
}

function thinkingTokens(model: string, body: Record<string, unknown>): number {
  if (!/gemini-(2\.5|3)|thinking/.test(model)) return 0;
  const config = body.generationConfig as { thinkingConfig?: { thinkingBudget?: unknown } } | undefined;
  const budget = config?.thinkingConfig?.thinkingBudget;
  if (budget === 0) return 0;
  return typeof budget === "number" && budget > 0 ? Math.min(REASONING_TOKENS, budget) : REASONING_TOKENS;
}

function maxOutputTokens(body: Record<string, unknown>): number | undefined {
  const value = (body.generationConfig as { maxOutputTokens?: unknown } | undefined)?.maxOutputTokens;
  if (value === undefined) return undefined;
  if (typeof value !== "number" || !Number.isInteger(value) || value < 1) {
    throw new SimulatedError(400, "generationConfig.maxOutputTokens must be a positive integer.");
  }
  return value;
}

function lastUserText(contents: unknown[]): string {
  for (let i = contents.length - 1; i >= 0; i--) {
    const content = contents[i] as { role?: unknown } | null;
    if (content && (content.role === undefined || content.role === "user")) return textsOf(content).join(" ");
  }
  return "";
}

function cachedTokensOf(body: Record<string, unknown>, state: SimState): number {
  if (typeof body.cachedContent !== "string") return 0;
  const cached = state.cachedContents.get(body.cachedContent);
  if (!cached) throw new SimulatedError(403, "CachedContent not found (or permission denied)");
  return cached.tokens;
}

function generateContent(model: string, streamed: boolean): Route {
  return (req, state) => {
    const body = readJson(req);
    const contents = Array.isArray(body.contents) ? body.contents : [];
    if (contents.length === 0 && body.cachedContent === undefined) {
      throw new SimulatedError(400, "* GenerateContentRequest.contents: contents is not specified");
    }
    const cached = cachedTokensOf(body, state);
    const promptTokens = sumTokens([...textsOf(body.systemInstruction), ...textsOf(contents)]) + cached;
    const gen = generate(lastUserText(contents), maxOutputTokens(body), thinkingTokens(model, body));
    const finishReason = gen.truncated ? "MAX_TOKENS" : "STOP";
    const responseId = state.nextId("");
    const usage = (candidates: number, final: boolean) => ({
      promptTokenCount: promptTokens,
      candidatesTokenCount: candidates,
      totalTokenCount: promptTokens + candidates + gen.reasoningTokens,
      ...(cached > 0 ? { cachedContentTokenCount: cached } : {}),
      ...(gen.reasoningTokens > 0 ? { thoughtsTokenCount: gen.reasoningTokens } : {}),
      ...(final
        ? {
            promptTokensDetails: [{ modality: "TEXT", tokenCount: promptTokens }],
            ...(cached > 0 ? { cacheTokensDetails: [{ modality: "TEXT", tokenCount: cached }] } : {}),
          }
        : {}),
    });
    const answer = (text: string, candidates: number, final: boolean) => ({
      candidates: [
        {
          content: { parts: [{ text }], role: "model" },
          ...(final ? { finishReason } : {}),
          index: 0,
        },
      ],
      usageMetadata: usage(candidates, final),
      modelVersion: model,
      responseId,
    });
    if (!streamed) return json(answer(gen.text, gen.textTokens, true));

    // Every chunk carries the usage so far; the last one is complete and has the finish reason.
    const answers = gen.pieces.map((piece, i) => answer(piece, i + 1, i === gen.pieces.length - 1));
    if (req.query.get("alt") === "sse") {
      return streamReply(answers.map((a) => `data: ${JSON.stringify(a)}\r\n\r\n`));
    }
    // Without alt=sse the answer is one JSON array, streamed element by element.
    const chunks = answers.map((a, i) => `${i === 0 ? "[" : ",\r\n"}${JSON.stringify(a)}`);
    chunks[chunks.length - 1] += "]";
    return streamReply(chunks, { "content-type": JSON_TYPE });
  };
}

function dimensionsOf(model: string, request: Record<string, unknown>): number {
  if (typeof request.outputDimensionality === "number") return request.outputDimensionality;
  return model.includes("gemini-embedding") ? 3072 : 768;
}

function embedContent(model: string): Route {
  return (req) => {
    const body = readJson(req);
    if (!body.content)
      throw new SimulatedError(400, "* EmbedContentRequest.content: content is not specified");
    return json({
      embedding: { values: embeddingVector(textsOf(body.content).join(" "), dimensionsOf(model, body)) },
    });
  };
}

/** What the @google/genai SDK calls for `models.embedContent` on the Gemini API. */
function batchEmbedContents(model: string): Route {
  return (req) => {
    const body = readJson(req);
    if (!Array.isArray(body.requests) || body.requests.length === 0) {
      throw new SimulatedError(400, "* BatchEmbedContentsRequest.requests: requests is not specified");
    }
    const embeddings = body.requests.map((request: Record<string, unknown>) => ({
      values: embeddingVector(textsOf(request?.content).join(" "), dimensionsOf(model, request ?? {})),
    }));
    return json({ embeddings });
  };
}

const countTokens: Route = (req, state) => {
  const body = readJson(req);
  const request = (body.generateContentRequest as Record<string, unknown> | undefined) ?? body;
  const cached = cachedTokensOf(request, state);
  const tokens = sumTokens([...textsOf(request.systemInstruction), ...textsOf(request.contents)]);
  return json({
    totalTokens: tokens + cached,
    ...(cached > 0 ? { cachedContentTokenCount: cached } : {}),
    promptTokensDetails: [{ modality: "TEXT", tokenCount: tokens + cached }],
  });
};

const MODELS: [string, string, string[]][] = [
  ["gemini-2.5-flash", "Gemini 2.5 Flash", ["generateContent", "countTokens", "createCachedContent"]],
  ["gemini-2.5-pro", "Gemini 2.5 Pro", ["generateContent", "countTokens", "createCachedContent"]],
  ["gemini-2.0-flash", "Gemini 2.0 Flash", ["generateContent", "countTokens", "createCachedContent"]],
  ["gemini-embedding-001", "Gemini Embedding 001", ["embedContent", "countTokens"]],
  ["text-embedding-004", "Text Embedding 004", ["embedContent"]],
];

const modelObject = ([id, displayName, methods]: [string, string, string[]]) => ({
  name: `models/${id}`,
  version: "001",
  displayName,
  description: `${displayName} (simulated)`,
  inputTokenLimit: 1_048_576,
  outputTokenLimit: 65_536,
  supportedGenerationMethods: methods,
});

const models: Route = () => json({ models: MODELS.map(modelObject) });

/** `GET /{version}/models/{model}`: the model, or Google's 404. */
const MODEL_LOOKUP = /^\/(v1|v1beta)\/models\/([^:/]+)$/;
const model =
  (id: string): Route =>
  () => {
    const found = MODELS.find(([known]) => known === id);
    if (!found) throw new SimulatedError(404, `models/${id} is not found for API version v1beta.`);
    return json(modelObject(found));
  };

const createCachedContent: Route = (req, state) => {
  const body = readJson(req);
  const model = requireString(body, "model");
  const tokens = sumTokens([...textsOf(body.systemInstruction), ...textsOf(body.contents)]);
  const name = `cachedContents/${state.nextId("")}`;
  state.cachedContents.set(name, { model, tokens });
  const ttlSeconds = typeof body.ttl === "string" ? Number.parseFloat(body.ttl) : 3600;
  const now = unixSeconds();
  return json({
    name,
    model,
    ...(typeof body.displayName === "string" ? { displayName: body.displayName } : {}),
    usageMetadata: { totalTokenCount: tokens },
    createTime: new Date(now * 1000).toISOString(),
    updateTime: new Date(now * 1000).toISOString(),
    expireTime: new Date((now + (Number.isFinite(ttlSeconds) ? ttlSeconds : 3600)) * 1000).toISOString(),
  });
};

function modelRoute(model: string, method: string): Route | undefined {
  switch (method) {
    case "generateContent":
      return generateContent(model, false);
    case "streamGenerateContent":
      return generateContent(model, true);
    case "embedContent":
      return embedContent(model);
    case "batchEmbedContents":
      return batchEmbedContents(model);
    case "countTokens":
      return countTokens;
    default:
      return undefined;
  }
}

const STATUS_NAMES: Record<number, string> = {
  400: "INVALID_ARGUMENT",
  401: "UNAUTHENTICATED",
  403: "PERMISSION_DENIED",
  404: "NOT_FOUND",
  409: "ALREADY_EXISTS",
  429: "RESOURCE_EXHAUSTED",
  499: "CANCELLED",
  500: "INTERNAL",
  503: "UNAVAILABLE",
  504: "DEADLINE_EXCEEDED",
};

export const gemini: VendorSim = {
  authenticate(req: SimRequest) {
    if (req.headers["x-goog-api-key"] || req.query.get("key")) return undefined;
    return new SimulatedError(
      401,
      "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.",
    );
  },
  route(req) {
    if (req.method === "GET" && MODELS_ROUTE.test(req.path)) return models;
    const lookup = req.method === "GET" ? MODEL_LOOKUP.exec(req.path) : null;
    if (lookup) return model(decodeURIComponent(lookup[2] as string));
    if (req.method === "POST" && req.path === CACHED_CONTENTS_ROUTE) return createCachedContent;
    const match = req.method === "POST" ? MODEL_ROUTE.exec(req.path) : null;
    return match ? modelRoute(match[2] as string, match[3] as string) : undefined;
  },
  notFound: () => new SimulatedError(404, "Requested entity was not found."),
  errorReply(error: SimulatedError): Reply {
    const status = STATUS_NAMES[error.status] ?? (error.status >= 500 ? "INTERNAL" : "FAILED_PRECONDITION");
    return jsonReply(
      { error: { code: error.status, message: error.message, status } },
      error.status,
      JSON_TYPE,
    );
  },
  headers: () => ({}),
};
