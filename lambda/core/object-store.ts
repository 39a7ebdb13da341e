/**
 * The object-store port: S3 in AWS, a folder locally. Keys are `/`-separated relative paths; both
 * adapters refuse keys that could name something outside the store.
 */
export interface ObjectInfo {
  key: string;
  size: number;
}

/** A whole body, or one produced piece by piece (streamed to the store in bounded memory). */
export type ObjectBody = Uint8Array | AsyncIterable<Uint8Array>;

export interface ObjectStore {
  /** Writes an object atomically: a reader sees the old object or the whole new one, never a part. */
  put(key: string, body: ObjectBody, contentType?: string): Promise<void>;
  /** The object's bytes, or undefined when there is none. */
  get(key: string): Promise<Uint8Array | undefined>;
  /** Whether there is an object under `key`, without reading it. */
  exists(key: string): Promise<boolean>;
  /** Every object whose key starts with `prefix`. */
  list(prefix: string): AsyncIterable<ObjectInfo>;
  /** Removes an object; removing a missing one is not an error. */
  delete(key: string): Promise<void>;
  /** The object's address for people and tools: `s3://bucket/key` or `file:///path`. */
  url(key: string): string;
  /**
   * A URL that fetches the object without credentials: presigned for `seconds` on S3 (`expiresAt` in
   * epoch ms); locally the file URL itself, which needs no grant and does not expire (`expiresAt` null).
   */
  downloadUrl(key: string, seconds: number): Promise<{ url: string; expiresAt: number | null }>;
}

const UNSAFE_SEGMENT = /^\.{1,2}$/;

/** Throws unless `key` is a relative path without empty, `.` or `..` segments, backslashes or NUL. */
export function assertObjectKey(key: string): void {
  const bad =
    key.length === 0 ||
    key.length > 1024 ||
    key.includes("\\") ||
    key.includes("\0") ||
    key.split("/").some((segment) => segment === "" || UNSAFE_SEGMENT.test(segment));
  if (bad) throw new Error(`invalid object key ${JSON.stringify(key)}`);
}
