import { assertObjectKey, type ObjectBody, type ObjectInfo, type ObjectStore } from "../../core/object-store";

/**
 * The object store in memory: keys to bytes. A put reads a streamed body whole before it stores it,
 * so a reader sees the old object or the new one, never a part, and a body that fails leaves the old
 * object in place (as S3's multipart upload and the folder store's rename do).
 */
export class MemoryObjectStore implements ObjectStore {
  private readonly objects = new Map<string, Uint8Array>();

  async put(key: string, body: ObjectBody): Promise<void> {
    assertObjectKey(key);
    let bytes: Uint8Array;
    if (body instanceof Uint8Array) bytes = body.slice();
    else {
      const parts: Uint8Array[] = [];
      for await (const part of body) parts.push(part);
      bytes = new Uint8Array(Buffer.concat(parts));
    }
    this.objects.set(key, bytes);
  }

  async get(key: string): Promise<Uint8Array | undefined> {
    assertObjectKey(key);
    return this.objects.get(key)?.slice();
  }

  async exists(key: string): Promise<boolean> {
    assertObjectKey(key);
    return this.objects.has(key);
  }

  async *list(prefix: string): AsyncIterable<ObjectInfo> {
    const keys = [...this.objects.keys()].filter((key) => key.startsWith(prefix)).sort();
    for (const key of keys) {
      const object = this.objects.get(key);
      if (object) yield { key, size: object.byteLength };
    }
  }

  async delete(key: string): Promise<void> {
    assertObjectKey(key);
    this.objects.delete(key);
  }

  url(key: string): string {
    assertObjectKey(key);
    return `memory:///${key}`;
  }

  async downloadUrl(key: string): Promise<{ url: string; expiresAt: null }> {
    return { url: this.url(key), expiresAt: null };
  }
}
