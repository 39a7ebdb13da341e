import { errors } from "../../core/errors";
import type { VendorDefinition } from "../../core/vendor-model";
import { geminiRoutes } from "./routes";
import { geminiUsageExtractor } from "./usage";

export const gemini: VendorDefinition = {
  name: "gemini",
  defaultUpstream: "https://generativelanguage.googleapis.com",
  routes: geminiRoutes,
  authHeaders: (vendorKey) => ({ "x-goog-api-key": vendorKey }),
  requestHeaders: ["x-goog-api-client"],
  checkQuery(query) {
    // Other encodings (`alt=json` on a stream, `alt=proto`) would change the wire format we relay and read.
    for (const name of ["alt", "$alt"]) {
      for (const value of query.getAll(name)) {
        if (value !== "sse") {
          throw errors.invalidField(name, "only 'sse' is supported (or leave it out).");
        }
      }
    }
  },
  usage: geminiUsageExtractor,
};
