/**
 * The S3 side of the rewrite step against a stand-in for a bucket (versioned or not) that answers the
 * five S3 calls the adapter makes the way S3 documents them: conditional writes, version listings,
 * deletes by version.
 */
import { describe, expect, it } from "vitest";
import { S3WarehouseFiles } from "../../../../lambda/adapters/s3/deletion-files";
import { FileChangedError } from "../../../../lambda/core/deletion";
import { Bucket } from "../../../support/s3-bucket-stand-in";

const bytes = (text: string) => new TextEncoder().encode(text);
const KEY = "interactions/project=proj-a/dt=2026-01-14/f.parquet";
const SIBLING = `${KEY}.other`;

describe("rewriting a warehouse file in a versioned bucket", () => {
  it("replaces the file and deletes every older version, so the old rows are gone for good", async () => {
    const bucket = new Bucket(true);
    bucket.write(KEY, bytes("first"));
    bucket.write(KEY, bytes("with u1 rows"));
    bucket.write(SIBLING, bytes("another file"));
    const files = new S3WarehouseFiles(bucket.client(), "data");
    const read = await files.read(KEY);
    expect(read && new TextDecoder().decode(read.bytes)).toBe("with u1 rows");

    await files.replace(KEY, bytes("without"), read?.version as string);
    const versions = bucket.keys.get(KEY) ?? [];
    expect(versions.map((v) => new TextDecoder().decode(v.body))).toEqual(["without"]);
    expect(bucket.keys.get(SIBLING)).toHaveLength(1);
  });

  it("removes a file with all its versions and delete markers", async () => {
    const bucket = new Bucket(true);
    bucket.write(KEY, bytes("old"));
    bucket.write(KEY, undefined);
    bucket.write(KEY, bytes("only u1 rows"));
    const files = new S3WarehouseFiles(bucket.client(), "data");
    const read = await files.read(KEY);
    await files.remove(KEY, read?.version as string);
    expect(bucket.keys.has(KEY)).toBe(false);
    expect(await files.read(KEY)).toBeUndefined();
  });

  it("refuses to overwrite or remove a file another writer changed since it was read", async () => {
    const bucket = new Bucket(true);
    bucket.write(KEY, bytes("as read"));
    const files = new S3WarehouseFiles(bucket.client(), "data");
    const read = await files.read(KEY);
    bucket.write(KEY, bytes("rewritten by someone else"));

    await expect(files.replace(KEY, bytes("mine"), read?.version as string)).rejects.toBeInstanceOf(
      FileChangedError,
    );
    await expect(files.remove(KEY, read?.version as string)).rejects.toBeInstanceOf(FileChangedError);
    expect(bucket.keys.get(KEY)?.map((v) => new TextDecoder().decode(v.body))).toEqual([
      "rewritten by someone else",
      "as read",
    ]);
  });
});

describe("rewriting a warehouse file in a bucket without versions", () => {
  it("replaces and removes conditionally, with nothing else to delete", async () => {
    const bucket = new Bucket(false);
    bucket.write(KEY, bytes("with u1 rows"));
    const files = new S3WarehouseFiles(bucket.client(), "data");
    const read = await files.read(KEY);
    await files.replace(KEY, bytes("without"), read?.version as string);
    expect(new TextDecoder().decode(bucket.current(KEY)?.body)).toBe("without");

    await expect(files.remove(KEY, read?.version as string)).rejects.toBeInstanceOf(FileChangedError);
    const again = await files.read(KEY);
    await files.remove(KEY, again?.version as string);
    expect(bucket.keys.has(KEY)).toBe(false);
  });
});
