import { asObject } from "../json";
import { openAiStyleUsage } from "../openai/usage";

/** Groq speaks OpenAI's formats; its streams also carry usage in the last chunk's `x_groq.usage`. */
export const groqUsageExtractor = openAiStyleUsage((chunk) => chunk.usage ?? asObject(chunk.x_groq)?.usage);
