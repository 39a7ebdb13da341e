/**
 * The S3 side of the rewrite step against a stand-in for a bucket (versioned or not) that answers the
 * five S3 calls the adapter makes the way S3 documents them: conditional writes, version listings,
 * deletes by version.
 */
import {
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  ListObjectVersionsCommand,
  NoSuchKey,
  PutObjectCommand,
  type S3Client,
  S3ServiceException,
} from "@aws-sdk/client-s3";
import { describe, expect, it } from "vitest";
import { S3WarehouseFiles } from "../../lambda/adapters/s3/deletion-files";
import { FileChangedError } from "../../lambda/core/deletion";

interface Version {
  versionId: string;
  etag: string;
  body?: Uint8Array;
  marker: boolean;
  at: number;
}

class Bucket {
  /** Newest first, per key. */
  readonly keys = new Map<string, Version[]>();
  private clock = 0;
  private ids = 0;

  constructor(readonly versioned: boolean) {}

  write(key: string, body: Uint8Array | undefined): Version {
    const version: Version = {
      versionId: this.versioned ? `v${++this.ids}` : "null",
      etag: body ? `"${Buffer.from(body).toString("hex")}-${this.ids}"` : "",
      ...(body && { body }),
      marker: body === undefined,
      at: ++this.clock * 1000,
    };
    const list = this.versioned ? (this.keys.get(key) ?? []) : [];
    this.keys.set(key, [version, ...list]);
    return version;
  }

  current(key: string): Version | undefined {
    const latest = this.keys.get(key)?.[0];
    return latest?.marker ? undefined : latest;
  }

  client(): S3Client {
    const failed = (status: number) =>
      new S3ServiceException({
        name: "PreconditionFailed",
        $fault: "client",
        $metadata: { httpStatusCode: status },
        message: "At least one of the pre-conditions you specified did not hold",
      });
    const send = async (command: unknown) => {
      if (command instanceof GetObjectCommand) {
        const current = this.current(command.input.Key as string);
        if (!current) throw new NoSuchKey({ $metadata: {}, message: "The specified key does not exist." });
        return {
          ETag: current.etag,
          ...(this.versioned && { VersionId: current.versionId }),
          Body: { transformToByteArray: async () => current.body },
        };
      }
      if (command instanceof PutObjectCommand) {
        const { Key, IfMatch, Body } = command.input;
        if (IfMatch !== undefined && this.current(Key as string)?.etag !== IfMatch) throw failed(412);
        const version = this.write(Key as string, Body as Uint8Array);
        return this.versioned ? { VersionId: version.versionId } : {};
      }
      if (command instanceof DeleteObjectCommand) {
        const { Key, IfMatch } = command.input;
        if (IfMatch !== undefined && this.current(Key as string)?.etag !== IfMatch) throw failed(412);
        if (this.versioned) this.write(Key as string, undefined);
        else this.keys.delete(Key as string);
        return {};
      }
      if (command instanceof ListObjectVersionsCommand) {
        const listed = [...this.keys].filter(([key]) => key.startsWith(command.input.Prefix ?? ""));
        const entries = (marker: boolean) =>
          listed.flatMap(([Key, versions]) =>
            versions
              .filter((v) => v.marker === marker)
              .map((v) => ({
                Key,
                VersionId: v.versionId,
                IsLatest: versions[0] === v,
                LastModified: new Date(v.at),
              })),
          );
        return { Versions: entries(false), DeleteMarkers: entries(true), IsTruncated: false };
      }
      if (command instanceof DeleteObjectsCommand) {
        for (const { Key, VersionId } of command.input.Delete?.Objects ?? []) {
          const left = (this.keys.get(Key as string) ?? []).filter((v) => v.versionId !== VersionId);
          if (left.length > 0) this.keys.set(Key as string, left);
          else this.keys.delete(Key as string);
        }
        return { Errors: [] };
      }
      throw new Error("an S3 call the adapter should not make");
    };
    return { send } as unknown as S3Client;
  }
}

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
