import type { VendorDefinition } from "../../core/vendor-model";
import { openAiRoutes } from "./routes";
import { openAiUsageExtractor } from "./usage";

/** Request headers of OpenAI's API that clients legitimately set. */
export const OPENAI_REQUEST_HEADERS = ["openai-organization", "openai-project", "openai-beta"] as const;

export const openai: VendorDefinition = {
  name: "openai",
  defaultUpstream: "https://api.openai.com",
  routes: openAiRoutes,
  authHeaders: (vendorKey) => ({ authorization: `Bearer ${vendorKey}` }),
  requestHeaders: OPENAI_REQUEST_HEADERS,
  usage: openAiUsageExtractor,
};
