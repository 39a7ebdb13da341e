import { randomUUID } from "node:crypto";
import { createWriteStream, type Dirent } from "node:fs";
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { pathToFileURL } from "node:url";
import { assertObjectKey, type ObjectBody, type ObjectInfo, type ObjectStore } from "../../core/object-store";

/** Written beside the target and renamed over it; listings skip them. */
const TEMP_SUFFIX = ".partial";

/** The object store as a folder: keys are paths under `root`. Puts are atomic by rename. */
export class FsObjectStore implements ObjectStore {
  constructor(readonly root: string) {}

  /** The file behind a key (for local readers such as DuckDB). */
  pathOf(key: string): string {
    assertObjectKey(key);
    return join(this.root, ...key.split("/"));
  }

  async put(key: string, body: ObjectBody): Promise<void> {
    const path = this.pathOf(key);
    await mkdir(dirname(path), { recursive: true });
    const temp = `${path}.${randomUUID()}${TEMP_SUFFIX}`;
    try {
      if (body instanceof Uint8Array) await writeFile(temp, body);
      else await pipeline(Readable.from(body), createWriteStream(temp));
      await rename(temp, path);
    } catch (err) {
      await rm(temp, { force: true });
      throw err;
    }
  }

  async get(key: string): Promise<Uint8Array | undefined> {
    try {
      return await readFile(this.pathOf(key));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      throw err;
    }
  }

  async exists(key: string): Promise<boolean> {
    try {
      return (await stat(this.pathOf(key))).isFile();
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === "ENOENT" || code === "ENOTDIR") return false;
      throw err;
    }
  }

  async *list(prefix: string): AsyncIterable<ObjectInfo> {
    const slash = prefix.lastIndexOf("/");
    const folder = prefix.slice(0, slash + 1);
    if (folder) assertObjectKey(folder.slice(0, -1));
    yield* this.walk(folder, prefix);
  }

  private async *walk(folder: string, prefix: string): AsyncIterable<ObjectInfo> {
    let entries: Dirent[];
    try {
      entries = await readdir(join(this.root, ...folder.split("/")), { withFileTypes: true });
    } catch (err) {
      if (
        (err as NodeJS.ErrnoException).code === "ENOENT" ||
        (err as NodeJS.ErrnoException).code === "ENOTDIR"
      )
        return;
      throw err;
    }
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const entry of entries) {
      const key = folder + entry.name;
      if (entry.isDirectory()) {
        // Descend only where keys under the folder can still match the prefix.
        const sub = `${key}/`;
        if (sub.startsWith(prefix) || prefix.startsWith(sub)) yield* this.walk(sub, prefix);
      } else if (entry.isFile() && key.startsWith(prefix) && !entry.name.endsWith(TEMP_SUFFIX)) {
        const info = await stat(join(this.root, ...key.split("/"))).catch(() => undefined);
        if (info) yield { key, size: info.size };
      }
    }
  }

  async delete(key: string): Promise<void> {
    await rm(this.pathOf(key), { force: true });
  }

  url(key: string): string {
    return pathToFileURL(this.pathOf(key)).href;
  }

  async downloadUrl(key: string): Promise<{ url: string; expiresAt: null }> {
    return { url: this.url(key), expiresAt: null };
  }
}
