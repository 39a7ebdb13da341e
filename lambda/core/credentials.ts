import { errors } from "./errors";

/**
 * How a caller presents its key. Exactly one presentation is used, by this precedence (documented in
 * README "Authentication"): `Authorization: Bearer` > `X-API-Key` > `x-goog-api-key` (Gemini family)
 * > `?api_key=` > `?key=` (Gemini family). A later presentation is ignored when an earlier one is
 * present, even if it differs: Bearer wins.
 */
export type Presentation = "bearer" | "x-api-key" | "x-goog-api-key" | "query:api_key" | "query:key";

export interface PresentedCredentials {
  /** The service key as presented: not yet validated. */
  serviceKey: string;
  /** The vendor half of a dual key (`<dmt key>;<vendor key>`), for this request only. */
  vendorKey?: string;
  via: Presentation;
}

export interface CredentialSource {
  header(name: string): string | undefined;
  query(name: string): string | undefined;
  /** Gemini-only presentations (`x-goog-api-key`, `?key=`) apply on the Gemini family alone. */
  geminiFamily: boolean;
}

/** Query parameters that carry keys: removed from anything forwarded, logged or stored. */
export const KEY_QUERY_PARAMS = ["api_key", "key"] as const;

export function presentedCredentials(source: CredentialSource): PresentedCredentials {
  const authorization = source.header("authorization");
  if (authorization !== undefined) return split(bearerToken(authorization), "bearer");
  const candidates: [Presentation, string | undefined][] = [
    ["x-api-key", source.header("x-api-key")],
    ["x-goog-api-key", source.geminiFamily ? source.header("x-goog-api-key") : undefined],
    ["query:api_key", source.query("api_key")],
    ["query:key", source.geminiFamily ? source.query("key") : undefined],
  ];
  for (const [via, value] of candidates) {
    if (value !== undefined) return split(value, via);
  }
  throw errors.missingApiKey();
}

function bearerToken(authorization: string): string {
  if (authorization === "") throw errors.missingApiKey();
  // Two Authorization headers arrive joined by ", "; a key never contains a comma.
  if (authorization.includes(",")) throw errors.invalidApiKey("Send exactly one Authorization header.");
  const scheme = authorization.slice(0, 7);
  if (scheme.toLowerCase() !== "bearer ") {
    throw errors.invalidApiKey("The Authorization header must be 'Bearer <API_KEY>'.");
  }
  return authorization.slice(7);
}

/**
 * A key, or a dual key: exactly one `;` between two non-empty halves. A service key never contains a
 * `;`, and a vendor key with one is refused rather than guessed at, so `K;a;b` and `K;;v` are invalid;
 * so is a vendor half with spaces or other bytes no vendor key has (it would be forwarded as sent).
 */
const VISIBLE_ASCII = /^[\x21-\x7e]+$/;

function split(value: string, via: Presentation): PresentedCredentials {
  if (value === "") throw errors.missingApiKey();
  const halves = value.split(";");
  if (halves.length === 1) return { serviceKey: value, via };
  const [serviceKey, vendorKey] = halves;
  if (halves.length !== 2 || !serviceKey || !vendorKey || !VISIBLE_ASCII.test(vendorKey)) {
    throw errors.invalidApiKey(
      "A dual key must be '<API_KEY>;<VENDOR_KEY>': two non-empty parts of visible ASCII, joined by exactly one ';'.",
    );
  }
  return { serviceKey, vendorKey, via };
}
