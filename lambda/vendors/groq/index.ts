import type { VendorDefinition } from "../../core/vendor-model";
import { OPENAI_REQUEST_HEADERS } from "../openai";
import { groqRoutes } from "./routes";
import { groqUsageExtractor } from "./usage";

export const groq: VendorDefinition = {
  name: "groq",
  defaultUpstream: "https://api.groq.com/openai",
  routes: groqRoutes,
  authHeaders: (vendorKey) => ({ authorization: `Bearer ${vendorKey}` }),
  requestHeaders: OPENAI_REQUEST_HEADERS,
  usage: groqUsageExtractor,
};
