import { createHash, createHmac } from "node:crypto";

type SourceData = string | ArrayBuffer | ArrayBufferView;

/** SHA-256, or HMAC-SHA-256 given a secret, for the signer, from node:crypto. */
export class Sha256 {
  private readonly hash;

  constructor(secret?: SourceData) {
    this.hash = secret === undefined ? createHash("sha256") : createHmac("sha256", toBytes(secret));
  }

  update(data: SourceData): void {
    this.hash.update(toBytes(data));
  }

  async digest(): Promise<Uint8Array> {
    return this.hash.digest();
  }
}

function toBytes(data: SourceData): Uint8Array {
  if (typeof data === "string") return Buffer.from(data, "utf8");
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  return new Uint8Array(data);
}
