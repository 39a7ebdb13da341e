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
import { FileChangedError, type WarehouseFile, type WarehouseFiles } from "../../core/deletion";
import { assertObjectKey } from "../../core/object-store";

interface S3Version {
  etag: string;
  /** Absent on a bucket without versioning. */
  versionId?: string;
}

interface ListedVersion {
  VersionId: string;
  LastModified: number;
  IsLatest: boolean;
}

/** S3's answers to a conditional write that lost: 412 (another version now), 409 (a write in progress). */
function lostRace(err: unknown): boolean {
  return (
    err instanceof S3ServiceException &&
    (err.$metadata.httpStatusCode === 412 || err.$metadata.httpStatusCode === 409)
  );
}

/**
 * The warehouse bucket as the rewrite step sees it. A replacement is one PutObject (atomic) made only
 * `If-Match` the ETag that was read, so a file another writer changed meanwhile is read again rather
 * than overwritten. On a versioned bucket the versions up to the new one are then deleted for good: a
 * deletion must not leave the rows behind in an old version.
 */
export class S3WarehouseFiles implements WarehouseFiles {
  private readonly prefix: string;

  constructor(
    private readonly client: S3Client,
    private readonly bucket: string,
    prefix = "",
  ) {
    this.prefix = prefix && !prefix.endsWith("/") ? `${prefix}/` : prefix;
  }

  private fullKey(key: string): string {
    assertObjectKey(key);
    return this.prefix + key;
  }

  async read(key: string): Promise<WarehouseFile | undefined> {
    try {
      const out = await this.client.send(
        new GetObjectCommand({ Bucket: this.bucket, Key: this.fullKey(key) }),
      );
      const version: S3Version = { etag: out.ETag ?? "", ...(out.VersionId && { versionId: out.VersionId }) };
      const bytes = out.Body ? await out.Body.transformToByteArray() : new Uint8Array();
      return { bytes, version: JSON.stringify(version) };
    } catch (err) {
      if (err instanceof NoSuchKey) return undefined;
      throw err;
    }
  }

  async replace(key: string, bytes: Uint8Array, version: string): Promise<void> {
    const Key = this.fullKey(key);
    const read = JSON.parse(version) as S3Version;
    let newVersion: string | undefined;
    try {
      const out = await this.client.send(
        new PutObjectCommand({ Bucket: this.bucket, Key, Body: bytes, IfMatch: read.etag }),
      );
      newVersion = out.VersionId;
    } catch (err) {
      if (lostRace(err)) throw new FileChangedError(`${key} changed since it was read`);
      throw err;
    }
    if (newVersion === undefined) return;
    const versions = await this.versionsOf(Key);
    const current = versions.find((v) => v.VersionId === newVersion);
    // Gone already (another rewrite won after ours): that rewrite purges the versions before it.
    if (!current) return;
    await this.deleteVersions(
      Key,
      versions.filter((v) => v.VersionId !== newVersion && v.LastModified <= current.LastModified),
    );
  }

  async remove(key: string, version: string): Promise<void> {
    const Key = this.fullKey(key);
    const read = JSON.parse(version) as S3Version;
    if (read.versionId === undefined) {
      try {
        await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key, IfMatch: read.etag }));
      } catch (err) {
        if (lostRace(err)) throw new FileChangedError(`${key} changed since it was read`);
        throw err;
      }
      return;
    }
    const versions = await this.versionsOf(Key);
    const latest = versions.find((v) => v.IsLatest);
    if (!latest) return;
    if (latest.VersionId !== read.versionId) throw new FileChangedError(`${key} changed since it was read`);
    // The file, every older version and delete marker: nothing of it is left to restore.
    await this.deleteVersions(
      Key,
      versions.filter((v) => v.LastModified <= latest.LastModified),
    );
  }

  /** Every version and delete marker of exactly this key. */
  private async versionsOf(Key: string): Promise<ListedVersion[]> {
    const found: ListedVersion[] = [];
    let KeyMarker: string | undefined;
    let VersionIdMarker: string | undefined;
    do {
      const page = await this.client.send(
        new ListObjectVersionsCommand({ Bucket: this.bucket, Prefix: Key, KeyMarker, VersionIdMarker }),
      );
      for (const v of [...(page.Versions ?? []), ...(page.DeleteMarkers ?? [])]) {
        if (v.Key !== Key || v.VersionId === undefined) continue;
        found.push({
          VersionId: v.VersionId,
          LastModified: v.LastModified?.getTime() ?? 0,
          IsLatest: v.IsLatest === true,
        });
      }
      KeyMarker = page.IsTruncated ? page.NextKeyMarker : undefined;
      VersionIdMarker = page.IsTruncated ? page.NextVersionIdMarker : undefined;
    } while (KeyMarker);
    return found;
  }

  private async deleteVersions(Key: string, versions: ListedVersion[]): Promise<void> {
    for (let i = 0; i < versions.length; i += 1000) {
      const out = await this.client.send(
        new DeleteObjectsCommand({
          Bucket: this.bucket,
          Delete: {
            Objects: versions.slice(i, i + 1000).map((v) => ({ Key, VersionId: v.VersionId })),
            Quiet: true,
          },
        }),
      );
      const failed = out.Errors?.[0];
      if (failed)
        throw new Error(`deleting an old version of ${Key} failed: ${failed.Code ?? "unknown error"}`);
    }
  }
}
