import type { VendorRoute } from "../../core/vendor-model";
import { includeUsage, openAiUsageInEvent } from "../openai/stream-usage";
import { healthRoutes, JSON_BODY_LIMIT } from "../routes";

const json = { kind: "json", bodyLimit: JSON_BODY_LIMIT, billing: "billable" } as const;

export const groqRoutes: readonly VendorRoute[] = [
  ...healthRoutes("groq"),
  {
    method: "POST",
    path: "/v1/chat/completions",
    operation: "chat",
    ...json,
    stream: "body-flag",
    streamUsage: includeUsage,
    usageInEvent: openAiUsageInEvent,
  },
  {
    method: "POST",
    path: "/v1/responses",
    operation: "responses",
    ...json,
    stream: "body-flag",
    usageInEvent: openAiUsageInEvent,
  },
  {
    method: "GET",
    path: "/v1/models",
    operation: "models",
    kind: "none",
    bodyLimit: 0,
    stream: "never",
    billing: "free",
  },
];
