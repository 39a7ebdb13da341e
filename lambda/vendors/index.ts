import { anthropic } from "./anthropic";
import { gemini } from "./gemini";
import { groq } from "./groq";
import { openai } from "./openai";
import type { VendorDefinition, VendorName } from "./types";

export const VENDORS: Readonly<Record<VendorName, VendorDefinition>> = { groq, openai, anthropic, gemini };
