import type { VendorRoute } from "../../core/vendor-model";
import { asObject } from "../json";
import { healthRoutes, JSON_BODY_LIMIT } from "../routes";

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
  {
    method: "GET",
    path: "/v1/models",
    operation: "models",
    kind: "none",
    bodyLimit: 0,
    stream: "never",
    billing: "free",
  },
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
