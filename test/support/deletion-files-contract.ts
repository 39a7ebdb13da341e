import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FileChangedError, type WarehouseFiles } from "../../lambda/core/deletion";

export interface WarehouseFilesUnderTest {
  files: WarehouseFiles;
  /** Another writer puts a file (the consumer, a concurrent rewrite). */
  write(key: string, bytes: Uint8Array): Promise<void>;
  close(): Promise<void>;
}

const bytes = (text: string) => new TextEncoder().encode(text);
const text = (data: Uint8Array | undefined) => (data ? new TextDecoder().decode(data) : undefined);
let serial = 0;
const unique = () => `interactions/project=proj-a/dt=2026-01-14/f-${++serial}.parquet`;

/** The cases every adapter of the deletion steps' warehouse files port (`core/deletion.ts`) must pass. */
export function warehouseFilesContract(name: string, make: () => Promise<WarehouseFilesUnderTest>): void {
  describe(`warehouse files contract: ${name}`, () => {
    let subject: WarehouseFilesUnderTest;
    beforeAll(async () => {
      subject = await make();
    });
    afterAll(() => subject.close());

    it("reads nothing where no file is", async () => {
      expect(await subject.files.read(unique())).toBeUndefined();
    });

    it("replaces a file still at the version read", async () => {
      const key = unique();
      await subject.write(key, bytes("with u1 rows"));
      const read = await subject.files.read(key);
      expect(text(read?.bytes)).toBe("with u1 rows");
      await subject.files.replace(key, bytes("without"), read?.version as string);
      expect(text((await subject.files.read(key))?.bytes)).toBe("without");
    });

    it("removes a file still at the version read", async () => {
      const key = unique();
      await subject.write(key, bytes("only u1 rows"));
      const read = await subject.files.read(key);
      await subject.files.remove(key, read?.version as string);
      expect(await subject.files.read(key)).toBeUndefined();
    });

    it("refuses to replace or remove a file another writer changed since it was read", async () => {
      const key = unique();
      await subject.write(key, bytes("as read"));
      const read = await subject.files.read(key);
      await subject.write(key, bytes("rewritten by someone else"));
      await expect(subject.files.replace(key, bytes("mine"), read?.version as string)).rejects.toBeInstanceOf(
        FileChangedError,
      );
      await expect(subject.files.remove(key, read?.version as string)).rejects.toBeInstanceOf(
        FileChangedError,
      );
      expect(text((await subject.files.read(key))?.bytes)).toBe("rewritten by someone else");
    });
  });
}
