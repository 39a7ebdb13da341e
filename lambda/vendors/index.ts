import type { VendorDefinition, VendorName } from "../core/vendor-model";
import { anthropic } from "./anthropic";
import { gemini } from "./gemini";
import { groq } from "./groq";
import { openai } from "./openai";

export const VENDORS: Readonly<Record<VendorName, VendorDefinition>> = { groq, openai, anthropic, gemini };
