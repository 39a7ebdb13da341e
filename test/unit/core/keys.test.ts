import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { displayPrefix, generateKey, hashSecret, parseKey, secretMatches } from "../../../lambda/core/keys";

const KEY_SHAPE = /^dmt_[a-z0-9]{16}_[A-Za-z0-9]{43}$/;
const ID_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789";
const SECRET_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

describe("generateKey", () => {
  it("makes dmt_<16 id>_<43 secret> with no ';' and stores SHA-256 of the secret only", () => {
    const k = generateKey();
    expect(k.key).toMatch(KEY_SHAPE);
    expect(k.key).not.toContain(";");
    expect(k.key).toBe(`dmt_${k.keyId}_${k.secret}`);
    expect(k.secretHash).toBe(createHash("sha256").update(k.secret).digest("hex"));
    expect(k.secretHash).not.toContain(k.secret);
  });

  it("has at least 128 bits of secret entropy: 43 characters, each uniform over 62", () => {
    const keys = Array.from({ length: 2000 }, () => generateKey());
    expect(new Set(keys.map((k) => k.key)).size).toBe(keys.length);
    const counts = new Map<string, number>();
    for (const { secret } of keys) for (const ch of secret) counts.set(ch, (counts.get(ch) ?? 0) + 1);
    expect([...counts.keys()].sort().join("")).toBe([...SECRET_ALPHABET].sort().join(""));
    expect(43 * Math.log2(counts.size)).toBeGreaterThanOrEqual(128);
    // Modulo bias (256 % 62 = 8) would give the first 8 characters 25% more hits; ±15% is >5 sigma.
    const expected = (keys.length * 43) / SECRET_ALPHABET.length;
    for (const [ch, n] of counts) {
      expect(Math.abs(n - expected) / expected, `character ${ch}`).toBeLessThan(0.15);
    }
  });

  it("draws public ids from [a-z0-9], every character in use", () => {
    const seen = new Set<string>();
    for (let i = 0; i < 500; i++) for (const ch of generateKey().keyId) seen.add(ch);
    expect([...seen].sort().join("")).toBe([...ID_ALPHABET].sort().join(""));
  });
});

describe("parseKey", () => {
  const { key, keyId, secret } = generateKey();

  it("splits a well-formed key into its public id and secret", () => {
    expect(parseKey(key)).toEqual({ keyId, secret });
  });

  it.each([
    ["truncated", key.slice(0, -1)],
    ["one character too many", `${key}A`],
    ["leading space", ` ${key}`],
    ["trailing space", `${key} `],
    ["trailing newline", `${key}\n`],
    ["trailing tab", `${key}\t`],
    ["with a ';' (a dual key is split before parsing)", `${key};`],
    ["upper-case prefix", `DMT_${key.slice(4)}`],
    ["upper-case id", `dmt_${keyId.toUpperCase().replace(/[0-9]/g, "A")}_${secret}`],
    ["no separator", `dmt_${keyId}${secret}`],
    ["NUL inside", `${key.slice(0, 10)}\u0000${key.slice(11)}`],
    ["non-ASCII look-alike", `${key.slice(0, -1)}\u0430`],
    ["empty", ""],
    ["prefix only", "dmt_"],
  ])("refuses a key %s", (_case, candidate) => {
    expect(parseKey(candidate)).toBeUndefined();
  });
});

describe("secretMatches", () => {
  const { secret, secretHash } = generateKey();

  it("accepts the secret whose hash is stored", () => {
    expect(secretMatches(secret, secretHash)).toBe(true);
    expect(hashSecret(secret)).toBe(secretHash);
  });

  it("refuses any other secret, including one differing in a single character", () => {
    const last = secret.at(-1) === "A" ? "B" : "A";
    expect(secretMatches(`${secret.slice(0, -1)}${last}`, secretHash)).toBe(false);
    expect(secretMatches(generateKey().secret, secretHash)).toBe(false);
  });

  it("refuses, without throwing, when the stored hash is damaged", () => {
    expect(secretMatches(secret, "")).toBe(false);
    expect(secretMatches(secret, secretHash.slice(0, -2))).toBe(false);
    expect(secretMatches(secret, "zz".repeat(32))).toBe(false);
  });
});

describe("displayPrefix", () => {
  it("shows the public part only", () => {
    const { key, keyId, secret } = generateKey();
    expect(displayPrefix(keyId)).toBe(`dmt_${keyId}`);
    expect(key.startsWith(displayPrefix(keyId))).toBe(true);
    expect(displayPrefix(keyId)).not.toContain(secret);
  });
});
