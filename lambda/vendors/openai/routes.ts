import type { VendorRoute } from "../../core/vendor-model";
import { healthRoutes, JSON_BODY_LIMIT, UPLOAD_BODY_LIMIT } from "../routes";
import { includeUsage, openAiUsageInEvent } from "./stream-usage";

const json = { kind: "json", bodyLimit: JSON_BODY_LIMIT } as const;
const upload = { kind: "multipart", bodyLimit: UPLOAD_BODY_LIMIT, stream: "never" } as const;

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
  },
  {
    method: "POST",
    path: "/v1/embeddings",
    operation: "embeddings",
    ...json,
    stream: "never",
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
  {
    method: "POST",
    path: "/v1/audio/transcriptions",
    operation: "transcription",
    ...upload,
    billing: "billable",
  },
  {
    method: "POST",
    path: "/v1/audio/translations",
    operation: "translation",
    ...upload,
    billing: "billable",
  },
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
  },
  { method: "POST", path: "/v1/images/edits", operation: "image", ...upload, billing: "billable" },
  { method: "POST", path: "/v1/images/variations", operation: "image", ...upload, billing: "billable" },
  {
    method: "POST",
    path: "/v1/moderations",
    operation: "moderation",
    ...json,
    stream: "never",
    billing: "free",
  },
];
