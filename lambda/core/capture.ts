import { REDACTED, redactServiceKeys } from "./keys";

/**
 * A request or response body as the call captured it and the interaction record keeps it: the text up
 * to a size cap (with a truncated flag), or, for binary bodies and uploads, only what it was and how
 * big (made below).
 */
export interface CapturedBody {
  /** Bytes on the wire (for a stream, what passed). */
  bytes: number;
  contentType?: string;
  /** The body's text, or for a stream the assembled final message as JSON; absent for binary bodies. */
  text?: string;
  /** The text was cut. */
  truncated: boolean;
}

const decoder = new TextDecoder();

/** Text of a body, cut to `limit` bytes (a character split by the cut becomes U+FFFD). */
export function captureText(
  body: Uint8Array,
  contentType: string | undefined,
  limit: number,
  bytes = body.byteLength,
): CapturedBody {
  const truncated = body.byteLength > limit;
  const text = decoder.decode(truncated ? body.subarray(0, limit) : body);
  return withType({ bytes, text, truncated }, contentType);
}

/** A value (an assembled stream message) as JSON text, cut to `limit` bytes. */
export function captureValue(
  value: unknown,
  bytes: number,
  contentType: string | undefined,
  limit: number,
): CapturedBody {
  if (value === undefined) return captureMetadata(bytes, contentType);
  return captureText(Buffer.from(JSON.stringify(value)), contentType, limit, bytes);
}

export function captureMetadata(bytes: number, contentType: string | undefined): CapturedBody {
  return withType({ bytes, truncated: false }, contentType);
}

function withType(body: CapturedBody, contentType: string | undefined): CapturedBody {
  if (contentType !== undefined) body.contentType = contentType;
  return body;
}

/**
 * The body with the given secrets (the vendor key the call used) and any service key replaced: a
 * vendor may echo the credentials it received in an error, and a record must never keep them. A
 * secret is matched as sent and as JSON escapes it.
 */
export function redactCaptured(body: CapturedBody, secrets: (string | undefined)[]): CapturedBody {
  if (body.text === undefined) return body;
  let text = redactServiceKeys(body.text);
  for (const secret of secrets) {
    if (!secret) continue;
    for (const form of new Set([secret, JSON.stringify(secret).slice(1, -1)])) {
      text = text.replaceAll(form, REDACTED);
    }
  }
  return text === body.text ? body : { ...body, text };
}
