import { createHash, randomBytes, timingSafeEqual } from "node:crypto";

/**
 * Service keys: `dmt_<public id>_<secret>`.
 * - public id: 16 characters of [a-z0-9] (~82 bits), the lookup key in the store and shown in listings;
 * - secret: 43 characters of base62 (~256 bits of entropy).
 * Only SHA-256 of the secret is stored: the secret is uniformly random and long, so a slow password
 * hash would add latency without adding safety.
 */
export const KEY_PREFIX = "dmt_";
const ID_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789";
const SECRET_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const ID_LENGTH = 16;
const SECRET_LENGTH = 43;
const KEY_PATTERN = /^dmt_([a-z0-9]{16})_([A-Za-z0-9]{43})$/;

/**
 * True when a text holds the service key prefix in any case: such a header or query value is never
 * forwarded to a vendor, whatever it is called.
 */
export function mentionsServiceKey(text: string): boolean {
  return text.toLowerCase().includes(KEY_PREFIX);
}

/** A service key inside a text, whole or cut short after its id. */
const KEY_IN_TEXT = /dmt_[a-z0-9]{16}(?:_[A-Za-z0-9]*)?/g;
export const REDACTED = "[redacted]";

/** The text with every service key in it replaced (a vendor may echo what it received). */
export function redactServiceKeys(text: string): string {
  return text.includes(KEY_PREFIX) ? text.replace(KEY_IN_TEXT, REDACTED) : text;
}

export interface ParsedKey {
  keyId: string;
  secret: string;
}

export interface NewKey extends ParsedKey {
  /** The full key, shown to its owner once. */
  key: string;
  secretHash: string;
}

/** Uniform random characters by rejection sampling (no modulo bias). */
function randomString(alphabet: string, length: number): string {
  const limit = 256 - (256 % alphabet.length);
  let out = "";
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < limit && out.length < length) out += alphabet[byte % alphabet.length];
    }
  }
  return out;
}

export function generateKey(): NewKey {
  const keyId = randomString(ID_ALPHABET, ID_LENGTH);
  const secret = randomString(SECRET_ALPHABET, SECRET_LENGTH);
  return { keyId, secret, key: `${KEY_PREFIX}${keyId}_${secret}`, secretHash: hashSecret(secret) };
}

/** Strict: a truncated, padded or otherwise altered key does not parse. Never trims. */
export function parseKey(candidate: string): ParsedKey | undefined {
  const m = KEY_PATTERN.exec(candidate);
  if (!m?.[1] || !m[2]) return undefined;
  return { keyId: m[1], secret: m[2] };
}

export function hashSecret(secret: string): string {
  return createHash("sha256").update(secret, "utf8").digest("hex");
}

/** Constant-time comparison of a presented secret against the stored hash. */
export function secretMatches(secret: string, storedHash: string): boolean {
  const presented = Buffer.from(hashSecret(secret), "hex");
  const stored = Buffer.from(storedHash, "hex");
  return presented.length === stored.length && timingSafeEqual(presented, stored);
}

/** What listings show of a key: enough to recognise it, nothing to use it. */
export function displayPrefix(keyId: string): string {
  return `${KEY_PREFIX}${keyId}`;
}
