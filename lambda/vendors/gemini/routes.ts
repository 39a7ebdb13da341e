import type { Operation, StreamDetection, VendorRoute } from "../../core/vendor-model";
import { asObject } from "../json";
import { healthRoutes, JSON_BODY_LIMIT } from "../routes";

const MODEL_METHODS: [string, Operation, StreamDetection, "free" | "billable"][] = [
  ["generateContent", "generate", "never", "billable"],
  ["streamGenerateContent", "generate", "always", "billable"],
  ["embedContent", "embed", "never", "billable"],
  // What the Gemini SDK calls for `models.embedContent`.
  ["batchEmbedContents", "embed", "never", "billable"],
  ["countTokens", "count_tokens", "never", "free"],
];

/** `v1` is the stable API; `v1beta` is the Gemini SDK's default: the same model routes under both. */
const modelRoutes = (version: string): VendorRoute[] => [
  {
    method: "GET",
    path: `/${version}/models`,
    operation: "models",
    kind: "none",
    bodyLimit: 0,
    stream: "never",
    billing: "free",
  },
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
];

export const geminiRoutes: readonly VendorRoute[] = [
  ...healthRoutes("gemini"),
  ...modelRoutes("v1"),
  ...modelRoutes("v1beta"),
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
