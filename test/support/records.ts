import { buildRecord, type InteractionInput, type InteractionRecord } from "../../lambda/core/record";
import { emptyUsage } from "../../lambda/core/usage";

/**
 * The record of one finished gpt-4o-mini chat call of 10 + 5 tokens costing 7 micro-USD, bodies kept,
 * for the warehouse's tests (compaction, retention, readers across a swap); `input` overrides any field.
 */
export function chatRecord(
  input: Pick<InteractionInput, "transactionId" | "projectId" | "startedAt"> & Partial<InteractionInput>,
): InteractionRecord {
  return buildRecord({
    keyId: "abcdefghijklmnop",
    vendor: "openai",
    endpoint: "/v1/chat/completions",
    model: "gpt-4o-mini",
    billingMode: "managed",
    statusCode: 200,
    streamed: false,
    latencyMs: 100,
    usage: { ...emptyUsage(), inputTokens: 10, outputTokens: 5 },
    costMicros: 7,
    userIdHeader: "u-1",
    request: { text: '{"prompt":"p"}', bytes: 14, truncated: false },
    response: { text: '{"answer":"a"}', bytes: 14, truncated: false },
    store: "full",
    ...input,
  });
}
