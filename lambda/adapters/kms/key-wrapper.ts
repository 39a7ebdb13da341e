import {
  DecryptCommand,
  GenerateDataKeyCommand,
  IncorrectKeyException,
  InvalidCiphertextException,
  KMSClient,
} from "@aws-sdk/client-kms";
import { DecryptionError, type KeyWrapper } from "../../core/crypto";

/** The encryption context's one pair: KMS binds the wrapped key to it, and CloudTrail shows it. */
const CONTEXT_KEY = "dmt:context";

/** One client per process; `endpoint` points it elsewhere (tests). */
export function createKmsClient(options: { endpoint?: string; region?: string } = {}): KMSClient {
  return new KMSClient({
    region: options.region ?? process.env.AWS_REGION ?? "local",
    ...(options.endpoint !== undefined
      ? { endpoint: options.endpoint, credentials: { accessKeyId: "local", secretAccessKey: "local" } }
      : {}),
    maxAttempts: 3,
  });
}

/**
 * The master key in AWS: a KMS key wraps every data key (GenerateDataKey) and unwraps it (Decrypt),
 * with the secret's context as the encryption context, so a wrapped key copied to another owner or
 * purpose does not unwrap. The plaintext data key never leaves this process; KMS keeps the master key.
 */
export class KmsKeyWrapper implements KeyWrapper {
  constructor(
    private readonly client: KMSClient,
    /** The key's ARN (or id): data keys are made by it, and only it is asked to unwrap them. */
    private readonly keyId: string,
  ) {}

  async generateDataKey(context: string): Promise<{ plaintext: Buffer; wrapped: Uint8Array }> {
    const out = await this.client.send(
      new GenerateDataKeyCommand({
        KeyId: this.keyId,
        KeySpec: "AES_256",
        EncryptionContext: { [CONTEXT_KEY]: context },
      }),
    );
    if (!out.Plaintext || !out.CiphertextBlob) throw new Error("KMS returned no data key.");
    return { plaintext: asBuffer(out.Plaintext), wrapped: out.CiphertextBlob };
  }

  async unwrap(wrapped: Uint8Array, context: string): Promise<Buffer> {
    try {
      const out = await this.client.send(
        new DecryptCommand({
          KeyId: this.keyId,
          CiphertextBlob: wrapped,
          EncryptionContext: { [CONTEXT_KEY]: context },
        }),
      );
      if (!out.Plaintext) throw new Error("KMS returned no plaintext.");
      return asBuffer(out.Plaintext);
    } catch (err) {
      // Another context, another key, or not a wrapped key at all: the value cannot be opened.
      if (err instanceof InvalidCiphertextException || err instanceof IncorrectKeyException) {
        throw new DecryptionError("The value could not be decrypted: the key or its context does not match.");
      }
      throw err;
    }
  }
}

/** The SDK's bytes, not a copy: the caller zeroes the data key after use, and so the only copy. */
function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}
