import type { VendorRoute } from "../../core/vendor-model";
import { healthRoutes, JSON_BODY_LIMIT, UPLOAD_BODY_LIMIT } from "../routes";
import { includeUsage, openAiUsageInEvent } from "./stream-usage";

const json = { kind: "json", bodyLimit: JSON_BODY_LIMIT } as const;

/** Parameters only gpt-image-1 takes: OpenAI runs it, not dall-e-2, when a call without a model sends one. */
const GPT_IMAGE_ONLY = [
  "background",
  "moderation",
  "output_compression",
  "output_format",
  "partial_images",
  "input_fidelity",
];
/** Image generation and edits: dall-e-2 unless a parameter specific to gpt-image-1 is used (OpenAI's API reference). */
const imageDefault = (field: (name: string) => unknown) =>
  GPT_IMAGE_ONLY.some((name) => field(name) !== undefined) ? "gpt-image-1" : "dall-e-2";
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
    defaultModel: imageDefault,
  },
  {
    method: "POST",
    path: "/v1/images/edits",
    operation: "image",
    ...upload,
    billing: "billable",
    defaultModel: imageDefault,
  },
  {
    method: "POST",
    path: "/v1/images/variations",
    operation: "image",
    ...upload,
    billing: "billable",
    // Variations are dall-e-2's only.
    defaultModel: () => "dall-e-2",
  },
  {
    method: "POST",
    path: "/v1/moderations",
    operation: "moderation",
    ...json,
    stream: "never",
    billing: "free",
    defaultModel: () => "omni-moderation-latest",
  },
];
