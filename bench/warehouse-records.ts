/**
 * Synthetic interaction records, made with the real record builder, for the warehouse tests and bench
 * until the proxy produces real ones.
 */
import { buildRecord, type InteractionInput, type InteractionRecord } from "../lambda/core/record";

const MODELS = ["gpt-4o-mini", "claude-sonnet-4-5", "gemini-2.5-flash", "llama-3.3-70b-versatile"] as const;
/** The vendor of each of `MODELS`, in the same order. */
const MODEL_VENDORS = ["openai", "anthropic", "gemini", "groq"] as const;
const PROMPTS = [
  "Say hello",
  'Quote "this", please, and a comma',
  "Line one\nline two\r\nline three",
  "Ünïcödé — 日本語 — emoji 🚀",
  '=HYPERLINK("http://example.invalid")',
];

export interface SyntheticOptions {
  projectId?: string;
  /** Epoch ms of the first record; record i starts `i * stepMs` later. */
  startMs?: number;
  stepMs?: number;
  overrides?: Partial<InteractionInput>;
}

/** The i-th synthetic record: deterministic, varied in model, vendor, user, status and body text. */
export function syntheticRecord(i: number, options: SyntheticOptions = {}): InteractionRecord {
  const model = MODELS[i % MODELS.length] as string;
  const vendor = MODEL_VENDORS[i % MODEL_VENDORS.length] as InteractionInput["vendor"];
  const prompt = PROMPTS[i % PROMPTS.length] as string;
  const requestBody = JSON.stringify({
    model,
    messages: [{ role: "user", content: prompt }],
    user: `user-${i % 7}`,
  });
  const responseBody = JSON.stringify({
    id: `cmpl-${i}`,
    choices: [{ message: { content: `answer ${i}` } }],
  });
  return buildRecord({
    transactionId: `txn_${options.projectId ?? "p"}_${i}`,
    requestId: `req-${i}`,
    projectId: options.projectId ?? "proj-a",
    keyId: "key0123456789abcd",
    vendor,
    endpoint: "/v1/chat/completions",
    model,
    billingMode: i % 5 === 0 ? "byok" : "managed",
    statusCode: i % 10 === 9 ? 429 : 200,
    ...(i % 10 === 9 ? { error: { type: "rate_limit_error", code: "rate_limit_exceeded" } } : {}),
    streamed: i % 2 === 0,
    startedAt: (options.startMs ?? Date.UTC(2026, 0, 15, 12)) + i * (options.stepMs ?? 1000),
    latencyMs: 100 + (i % 50),
    ttftMs: 20 + (i % 10),
    usage: {
      inputTokens: 10 + (i % 100),
      outputTokens: 5 + (i % 40),
      cachedInputTokens: i % 3,
      cacheWriteTokens: 0,
      reasoningTokens: i % 4,
      estimated: false,
      complete: true,
    },
    costMicros: 1234 + i,
    priceVersion: "2026-01",
    userAgent: "OpenAI/JS 6.0",
    request: { text: requestBody, bytes: Buffer.byteLength(requestBody), truncated: false },
    response: { text: responseBody, bytes: Buffer.byteLength(responseBody), truncated: false },
    store: "full",
    ...options.overrides,
  });
}
