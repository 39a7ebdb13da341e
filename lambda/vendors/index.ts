import type { VendorDefinition, VendorName } from "../core/vendor-model";
import { anthropic } from "./anthropic";
import { gemini } from "./gemini";
import { groq } from "./groq";
import { openai } from "./openai";

/** Every vendor's definition, by name: what the proxy serves under `/<name>`. */
export const VENDOR_DEFINITIONS: Readonly<Record<VendorName, VendorDefinition>> = {
  groq,
  openai,
  anthropic,
  gemini,
};
