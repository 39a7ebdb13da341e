// Groq as data: OpenAI's dialect (its stream usage and extractor, read from `x_groq` too), its own
// routes, and the definition the proxy serves under /groq.
import { errors } from "../core/errors";
import type { VendorDefinition, VendorRoute } from "../core/vendor-model";
import { asObject } from "./json";
import {
  answeredInTheCall,
  audioRoute,
  includeUsage,
  OPENAI_REQUEST_HEADERS,
  openAiStyleUsage,
  openAiUsageInEvent,
} from "./openai";
import { healthRoutes, JSON_BODY_LIMIT, modelRoutes } from "./routes";
import { groqAudioFormat } from "./transcripts";

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
    check: answeredInTheCall,
  },
  audioRoute("transcription", groqAudioFormat, audioInTheUpload),
  audioRoute("translation", groqAudioFormat, audioInTheUpload),
  ...modelRoutes("/v1/models"),
];

/**
 * Groq also transcribes audio it fetches from a `url` field instead of the upload; the upload's size is
 * what bounds a call's seconds, and so its credit hold (vendors/bounds.ts), so the audio must be in it.
 */
function audioInTheUpload(field: (name: string) => unknown): void {
  if (field("url") !== undefined) {
    throw errors.invalidField(
      "url",
      "send the audio as the upload's file: its size bounds what the call may cost.",
    );
  }
}

/** Groq speaks OpenAI's formats; its streams also carry usage in the last chunk's `x_groq.usage`. */
export const groqUsageExtractor = openAiStyleUsage((chunk) => chunk.usage ?? asObject(chunk.x_groq)?.usage);

export const groq: VendorDefinition = {
  name: "groq",
  defaultUpstream: "https://api.groq.com/openai",
  routes: groqRoutes,
  authHeaders: (vendorKey) => ({ authorization: `Bearer ${vendorKey}` }),
  requestHeaders: OPENAI_REQUEST_HEADERS,
  usage: groqUsageExtractor,
};
