import { VENDOR_NAMES } from "./vendor-names";

/**
 * Endpoint identities and the patterns that restrict a key to some of them.
 * An endpoint is `<family>:<path>`: `openai:/v1/embeddings` for `/openai/v1/embeddings`,
 * `api:/api/v1/exports` for the data API. A pattern may use `*` for any run of characters,
 * so `openai:*`, `gemini:/v1beta/models/*:generateContent` and `*:/v1/models` all work.
 */
export const FAMILIES = [...VENDOR_NAMES, "api"] as const;
export type Family = (typeof FAMILIES)[number];

const PATTERN_SHAPE = new RegExp(`^(${FAMILIES.join("|")}|\\*):(\\*|\\/[A-Za-z0-9._~:/*@-]*)$`);

/**
 * What an official SDK puts before every path of a vendor that its other clients do not: Groq's own SDK
 * (`groq-sdk`, `groq` for Python) has the base URL `https://api.groq.com` and calls
 * `/openai/v1/chat/completions`, while the OpenAI SDK pointed at Groq has the base URL
 * `https://api.groq.com/openai/v1`. Both name one endpoint, `groq:/v1/chat/completions`.
 */
const SDK_PATH_PREFIXES: Partial<Record<Family, string>> = { groq: "/openai" };

/** A path under a vendor's prefix as its endpoint is named: the SDK's prefix above taken off. */
export function vendorPath(family: Family, path: string): string {
  const prefix = SDK_PATH_PREFIXES[family];
  return prefix !== undefined && path.startsWith(`${prefix}/`) ? path.slice(prefix.length) : path;
}

/** The endpoint identity of a request path, or undefined for paths outside every family. */
export function endpointOf(path: string): string | undefined {
  if (path === "/api" || path.startsWith("/api/")) return `api:${path}`;
  const slash = path.indexOf("/", 1);
  const family = path.slice(1, slash === -1 ? undefined : slash);
  if (!(FAMILIES as readonly string[]).includes(family)) return undefined;
  return `${family}:${slash === -1 ? "/" : vendorPath(family as Family, path.slice(slash))}`;
}

export function validatePattern(pattern: string): string | undefined {
  if (pattern.length > 200) return "a pattern is at most 200 characters";
  if (!PATTERN_SHAPE.test(pattern)) {
    return `'${pattern}' is not '<family>:<path>' with family one of ${FAMILIES.join(", ")} or '*', and a path starting with '/'`;
  }
  return undefined;
}

const compiled = new Map<string, RegExp>();
/** A `*` glob (any run of characters) as an anchored RegExp; compiled once per pattern. */
export function globToRegExp(pattern: string): RegExp {
  let re = compiled.get(pattern);
  if (!re) {
    const body = pattern
      .split("*")
      .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"))
      .join(".*");
    re = new RegExp(`^${body}$`);
    if (compiled.size > 10_000) compiled.clear();
    compiled.set(pattern, re);
  }
  return re;
}

export function endpointAllowed(allow: readonly string[] | undefined, endpoint: string): boolean {
  if (!allow) return true;
  return allow.some((pattern) => globToRegExp(pattern).test(endpoint));
}
