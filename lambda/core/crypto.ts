import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";

/**
 * Envelope encryption with AES-256-GCM: every secret gets its own data key, and only the data key,
 * wrapped by a master key, is stored beside the ciphertext. The master key lives in a local key file
 * or, in AWS, in KMS; both sit behind `KeyWrapper`. A context string (the secret's owner and purpose)
 * is bound as additional authenticated data, so a record copied to another owner does not decrypt.
 */
export interface KeyWrapper {
  /** A fresh 256-bit data key, and the same key wrapped by the master key under `context`. */
  generateDataKey(context: string): Promise<{ plaintext: Buffer; wrapped: Uint8Array }>;
  /** Throws DecryptionError when the master key or the context differ from the wrapping. */
  unwrap(wrapped: Uint8Array, context: string): Promise<Buffer>;
}

export interface SealedSecret {
  wrappedKey: Uint8Array;
  /** IV (12 bytes), ciphertext, GCM tag (16 bytes). */
  ciphertext: Uint8Array;
}

export class DecryptionError extends Error {
  override name = "DecryptionError";
}

const IV_BYTES = 12;
const TAG_BYTES = 16;

export function aesGcmEncrypt(key: Uint8Array, plaintext: Uint8Array, context: string): Buffer {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv("aes-256-gcm", key, iv);
  cipher.setAAD(Buffer.from(context, "utf8"));
  const body = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return Buffer.concat([iv, body, cipher.getAuthTag()]);
}

export function aesGcmDecrypt(key: Uint8Array, sealed: Uint8Array, context: string): Buffer {
  if (sealed.length < IV_BYTES + TAG_BYTES) throw new DecryptionError("The encrypted value is truncated.");
  const bytes = Buffer.from(sealed);
  const decipher = createDecipheriv("aes-256-gcm", key, bytes.subarray(0, IV_BYTES));
  decipher.setAAD(Buffer.from(context, "utf8"));
  decipher.setAuthTag(bytes.subarray(bytes.length - TAG_BYTES));
  try {
    return Buffer.concat([
      decipher.update(bytes.subarray(IV_BYTES, bytes.length - TAG_BYTES)),
      decipher.final(),
    ]);
  } catch {
    throw new DecryptionError("The value could not be decrypted: the key or its context does not match.");
  }
}

export async function sealSecret(
  wrapper: KeyWrapper,
  plaintext: string,
  context: string,
): Promise<SealedSecret> {
  const dataKey = await wrapper.generateDataKey(context);
  try {
    return {
      wrappedKey: dataKey.wrapped,
      ciphertext: aesGcmEncrypt(dataKey.plaintext, Buffer.from(plaintext, "utf8"), context),
    };
  } finally {
    dataKey.plaintext.fill(0);
  }
}

export async function openSecret(
  wrapper: KeyWrapper,
  sealed: SealedSecret,
  context: string,
): Promise<string> {
  const dataKey = await wrapper.unwrap(sealed.wrappedKey, context);
  try {
    return aesGcmDecrypt(dataKey, sealed.ciphertext, context).toString("utf8");
  } finally {
    dataKey.fill(0);
  }
}
