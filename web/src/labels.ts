import type { BillingMode, Vendor } from "./api";

/** How the pages name vendors and billing modes. */

export const VENDOR_LABELS: Record<Vendor, string> = {
  groq: "Groq",
  openai: "OpenAI",
  anthropic: "Anthropic",
  gemini: "Gemini",
};

export const BILLING_LABELS: Record<BillingMode, string> = {
  managed: "Credits",
  byok: "BYOK",
  dual: "Dual key",
};

export const BILLING_HINTS: Record<BillingMode, string> = {
  managed: "Paid from prepaid credits with the service's vendor key",
  byok: "Sent with the project's own vendor key; no credits spent",
  dual: "Sent with the vendor key the caller attached; no credits spent",
};

export const vendorLabel = (vendor: string) => VENDOR_LABELS[vendor as Vendor] ?? vendor;
