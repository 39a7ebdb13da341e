/**
 * A stand-in for an S3 bucket (versioned or not) behind an `S3Client`: it answers the five S3 calls
 * the warehouse files adapter makes (`adapters/s3/deletion-files.ts`) the way S3 documents them:
 * conditional writes, version listings, deletes by version.
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

interface Version {
  versionId: string;
  etag: string;
  body?: Uint8Array;
  marker: boolean;
  at: number;
}

export class Bucket {
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
