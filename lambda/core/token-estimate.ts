/**
 * A rough token count for text a vendor does not count for us (legacy completions, Gemini embeddings):
 * about four characters per token for English, the vendors' own rule of thumb. Figures from here are
 * always marked `estimated`.
 */
export function estimateTokens(text: string): number {
  return text.length === 0 ? 0 : Math.ceil(text.length / 4);
}
