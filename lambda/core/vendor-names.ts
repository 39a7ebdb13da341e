/** The vendor families dmt proxies, in the order every list shows them: the one place they are named. */
export const VENDOR_NAMES = ["groq", "openai", "anthropic", "gemini"] as const;
export type VendorName = (typeof VENDOR_NAMES)[number];
