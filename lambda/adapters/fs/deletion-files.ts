import { createHash } from "node:crypto";
import { FileChangedError, type WarehouseFile, type WarehouseFiles } from "../../core/deletion";
import type { FsObjectStore } from "./object-store";

const versionOf = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

/**
 * The warehouse folder as the rewrite step sees it. A replacement is written beside the file and
 * renamed over it (FsObjectStore.put), so a reader sees the old file or the new one, never a mix. The
 * version is the content's hash; the check before the rename is enough locally, where one process runs
 * the deletions one after another and the consumer only ever adds new files.
 */
export class FsWarehouseFiles implements WarehouseFiles {
  constructor(private readonly objects: FsObjectStore) {}

  async read(key: string): Promise<WarehouseFile | undefined> {
    const bytes = await this.objects.get(key);
    return bytes && { bytes, version: versionOf(bytes) };
  }

  async replace(key: string, bytes: Uint8Array, version: string): Promise<void> {
    await this.expect(key, version);
    await this.objects.put(key, bytes);
  }

  async remove(key: string, version: string): Promise<void> {
    await this.expect(key, version);
    await this.objects.delete(key);
  }

  private async expect(key: string, version: string): Promise<void> {
    const current = await this.objects.get(key);
    if (!current || versionOf(current) !== version)
      throw new FileChangedError(`${key} changed since it was read`);
  }
}
