import type { VendorDefinition } from "../../core/vendor-model";
import { anthropicRoutes } from "./routes";
import { anthropicUsageExtractor } from "./usage";

export const anthropic: VendorDefinition = {
  name: "anthropic",
  defaultUpstream: "https://api.anthropic.com",
  routes: anthropicRoutes,
  authHeaders: (vendorKey) => ({ "x-api-key": vendorKey }),
  requestHeaders: ["anthropic-version", "anthropic-beta"],
  // The API refuses calls without a version; the SDKs always send one, curl users often do not.
  defaultHeaders: { "anthropic-version": "2023-06-01" },
  usage: anthropicUsageExtractor,
};
