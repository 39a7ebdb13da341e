import { randomBytes } from "node:crypto";
import { aesGcmDecrypt, aesGcmEncrypt, type KeyWrapper } from "../../core/crypto";

/**
 * A master key that lives in memory only (32 random bytes per instance): what LocalMasterKey does
 * with its file and KMS with its key, for tests and for stores that end with the process.
 */
export class MemoryMasterKey implements KeyWrapper {
  private readonly key = randomBytes(32);

  async generateDataKey(context: string): Promise<{ plaintext: Buffer; wrapped: Uint8Array }> {
    const plaintext = randomBytes(32);
    return { plaintext, wrapped: aesGcmEncrypt(this.key, plaintext, context) };
  }

  async unwrap(wrapped: Uint8Array, context: string): Promise<Buffer> {
    return aesGcmDecrypt(this.key, wrapped, context);
  }
}
