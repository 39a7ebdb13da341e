import { chmodSync, existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { LocalMasterKey } from "../../../lambda/adapters/fs/master-key";
import { DecryptionError, openSecret, sealSecret } from "../../../lambda/core/crypto";
import { ApiError } from "../../../lambda/core/errors";
import { parseVendor, validateVendorKey, vendorKeyContext } from "../../../lambda/core/vendor-keys";
import { VENDOR_NAMES } from "../../../lambda/core/vendor-names";

const KEY = "sk-proj-Abc123_def456-GHI789jkl";
const dirs: string[] = [];
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "dmt-vk-"));
  dirs.push(dir);
  return dir;
}
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function refusal(fn: () => unknown): ApiError {
  try {
    fn();
  } catch (err) {
    if (err instanceof ApiError) return err;
    throw err;
  }
  throw new Error("expected an ApiError");
}

describe("vendors and key validation", () => {
  it("knows the four vendors", () => {
    expect(VENDOR_NAMES).toEqual(["groq", "openai", "anthropic", "gemini"]);
    expect(parseVendor("gemini")).toBe("gemini");
    expect(refusal(() => parseVendor("azure")).message).toContain("groq, openai, anthropic, gemini");
    expect(refusal(() => parseVendor("api")).status).toBe(400);
  });

  it("accepts real key shapes", () => {
    for (const key of [
      KEY,
      `gsk_${"a".repeat(52)}`,
      `AIza${"B".repeat(35)}`,
      `sk-ant-api03-${"x".repeat(95)}`,
    ]) {
      expect(() => validateVendorKey(key)).not.toThrow();
    }
  });

  it.each([
    ["a trailing newline", `${KEY}\n`, "whitespace"],
    ["a trailing space", `${KEY} `, "whitespace"],
    ["an inner tab", "sk-proj-\tAbc123def456GHI", "whitespace"],
    ["a no-break space", "sk-proj-\u00a0Abc123def456GHI", "whitespace"],
    ["a control character", "sk-proj-\u0001Abc123def456GHI", "control characters"],
    ["non-ASCII", "sk-proj-Abc123déf456GHI789", "printable ASCII"],
    ["too short", "sk-short", "16 to 512"],
    ["empty", "", "16 to 512"],
    ["too long", "k".repeat(513), "16 to 512"],
  ])("refuses %s with a 400 that does not echo the key", (_label, key, why) => {
    const err = refusal(() => validateVendorKey(key));
    expect(err.status).toBe(400);
    expect(err.message).toContain("'key'");
    expect(err.message).toContain(why);
    if (key.length > 0) expect(err.message).not.toContain(key.trim());
  });
});

describe("envelope encryption with the local master key", () => {
  const context = vendorKeyContext("demo", "openai");

  it("creates the key file on first use only, with mode 0600, and round-trips a secret", async () => {
    const dir = tempDir();
    const master = LocalMasterKey.inDataDir(dir);
    expect(existsSync(master.path)).toBe(false);
    const sealed = await sealSecret(master, KEY, context);
    expect(statSync(master.path).mode & 0o777).toBe(0o600);
    expect(statSync(master.path).size).toBe(32);
    expect(Buffer.from(sealed.ciphertext).includes(Buffer.from(KEY))).toBe(false);
    expect(await openSecret(master, sealed, context)).toBe(KEY);
    // Another process (instance) on the same data dir reads the same key.
    expect(await openSecret(LocalMasterKey.inDataDir(dir), sealed, context)).toBe(KEY);
  });

  it("uses a fresh data key and IV per secret", async () => {
    const master = LocalMasterKey.inDataDir(tempDir());
    const a = await sealSecret(master, KEY, context);
    const b = await sealSecret(master, KEY, context);
    expect(Buffer.from(a.wrappedKey).equals(Buffer.from(b.wrappedKey))).toBe(false);
    expect(Buffer.from(a.ciphertext).equals(Buffer.from(b.ciphertext))).toBe(false);
  });

  it("fails with another master key, another context or a flipped bit", async () => {
    const master = LocalMasterKey.inDataDir(tempDir());
    const sealed = await sealSecret(master, KEY, context);
    await expect(openSecret(LocalMasterKey.inDataDir(tempDir()), sealed, context)).rejects.toThrow(
      DecryptionError,
    );
    await expect(openSecret(master, sealed, vendorKeyContext("other", "openai"))).rejects.toThrow(
      DecryptionError,
    );
    await expect(openSecret(master, sealed, vendorKeyContext("demo", "groq"))).rejects.toThrow(
      DecryptionError,
    );
    const flipped = Buffer.from(sealed.ciphertext);
    flipped[14] = (flipped[14] ?? 0) ^ 1;
    await expect(openSecret(master, { ...sealed, ciphertext: flipped }, context)).rejects.toThrow(
      DecryptionError,
    );
    await expect(openSecret(master, { ...sealed, ciphertext: new Uint8Array(5) }, context)).rejects.toThrow(
      DecryptionError,
    );
  });

  it("two instances racing to create the file end up with one key", async () => {
    const dir = tempDir();
    const instances = Array.from({ length: 8 }, () => LocalMasterKey.inDataDir(dir));
    const sealed = await Promise.all(instances.map((master) => sealSecret(master, KEY, context)));
    for (const master of instances) {
      for (const one of sealed) expect(await openSecret(master, one, context)).toBe(KEY);
    }
  });

  it("refuses a key file other users can read, and one of the wrong size", async () => {
    const dir = tempDir();
    const path = join(dir, "master.key");
    writeFileSync(path, Buffer.alloc(32, 7), { mode: 0o644 });
    chmodSync(path, 0o644);
    await expect(sealSecret(new LocalMasterKey(path), KEY, context)).rejects.toThrow(/chmod 600/);
    chmodSync(path, 0o600);
    writeFileSync(path, Buffer.alloc(16, 7));
    await expect(sealSecret(new LocalMasterKey(path), KEY, context)).rejects.toThrow(/exactly 32 bytes/);
  });
});
