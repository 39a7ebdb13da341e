import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FsWarehouseFiles } from "../../lambda/adapters/fs/deletion-files";
import { FsObjectStore } from "../../lambda/adapters/fs/object-store";
import { S3WarehouseFiles } from "../../lambda/adapters/s3/deletion-files";
import { warehouseFilesContract } from "../support/deletion-files-contract";
import { Bucket } from "../support/s3-bucket-stand-in";

// The local warehouse folder.
warehouseFilesContract("FsWarehouseFiles", async () => {
  const dir = mkdtempSync(join(tmpdir(), "dmt-contract-"));
  const objects = new FsObjectStore(dir);
  return {
    files: new FsWarehouseFiles(objects),
    write: (key, bytes) => objects.put(key, bytes),
    async close() {
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

// S3WarehouseFiles over the S3 bucket stand-in (an S3Client answering its five calls), with and without
// versioning. No S3 server runs offline: the stand-in answers at the SDK's command level.
for (const versioned of [true, false]) {
  warehouseFilesContract(
    `S3WarehouseFiles over a ${versioned ? "versioned" : "plain"} bucket stand-in`,
    async () => {
      const bucket = new Bucket(versioned);
      return {
        files: new S3WarehouseFiles(bucket.client(), "data"),
        write: async (key, bytes) => {
          bucket.write(key, bytes);
        },
        close: async () => {},
      };
    },
  );
}
