/** OpenAI's endpoints that answer figures about their input rather than text: embeddings and moderations. */
import { jsonReply, readJson, requireString, SimulatedError } from "./reply";
import { embeddingVector, estimateTokens, float32Base64 } from "./text";
import type { Route } from "./vendor";

export const embeddings: Route = (req) => {
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

export const moderations: Route = (req, state) => {
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
