import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  ListObjectsV2Command,
  NoSuchKey,
  PutObjectCommand,
  type S3Client,
  S3ServiceException,
  UploadPartCommand,
} from "@aws-sdk/client-s3";
import { assertObjectKey, type ObjectBody, type ObjectInfo, type ObjectStore } from "../../core/object-store";
import { presignS3Get } from "./presign";

/** Streamed bodies go up in parts of this size (S3's minimum part is 5 MiB): memory stays at one part. */
const PART_BYTES = 8 * 1024 * 1024;

/** The object store on an S3 bucket, optionally under a key prefix (`s3://bucket/prefix/`). */
export class S3ObjectStore implements ObjectStore {
  private readonly prefix: string;

  constructor(
    private readonly client: S3Client,
    readonly bucket: string,
    prefix = "",
    private readonly clock: () => number = Date.now,
  ) {
    this.prefix = prefix && !prefix.endsWith("/") ? `${prefix}/` : prefix;
  }

  private fullKey(key: string): string {
    assertObjectKey(key);
    return this.prefix + key;
  }

  async put(key: string, body: ObjectBody, contentType?: string): Promise<void> {
    const Key = this.fullKey(key);
    if (body instanceof Uint8Array) {
      await this.client.send(
        new PutObjectCommand({ Bucket: this.bucket, Key, Body: body, ContentType: contentType }),
      );
      return;
    }
    await this.putStreamed(Key, body, contentType);
  }

  /** One PutObject when the body fits a part, else a multipart upload that is aborted on failure. */
  private async putStreamed(
    Key: string,
    body: AsyncIterable<Uint8Array>,
    contentType?: string,
  ): Promise<void> {
    let buffered: Uint8Array[] = [];
    let bufferedBytes = 0;
    let uploadId: string | undefined;
    const parts: { ETag: string; PartNumber: number }[] = [];
    const uploadPart = async () => {
      const Body = Buffer.concat(buffered, bufferedBytes);
      buffered = [];
      bufferedBytes = 0;
      if (uploadId === undefined) {
        const created = await this.client.send(
          new CreateMultipartUploadCommand({ Bucket: this.bucket, Key, ContentType: contentType }),
        );
        uploadId = created.UploadId;
      }
      const PartNumber = parts.length + 1;
      const uploaded = await this.client.send(
        new UploadPartCommand({ Bucket: this.bucket, Key, UploadId: uploadId, PartNumber, Body }),
      );
      parts.push({ ETag: uploaded.ETag ?? "", PartNumber });
    };
    try {
      for await (const chunk of body) {
        buffered.push(chunk);
        bufferedBytes += chunk.byteLength;
        if (bufferedBytes >= PART_BYTES) await uploadPart();
      }
      if (uploadId === undefined) {
        const Body = Buffer.concat(buffered, bufferedBytes);
        await this.client.send(
          new PutObjectCommand({ Bucket: this.bucket, Key, Body, ContentType: contentType }),
        );
        return;
      }
      if (bufferedBytes > 0) await uploadPart();
      await this.client.send(
        new CompleteMultipartUploadCommand({
          Bucket: this.bucket,
          Key,
          UploadId: uploadId,
          MultipartUpload: { Parts: parts },
        }),
      );
    } catch (err) {
      if (uploadId !== undefined) {
        await this.client
          .send(new AbortMultipartUploadCommand({ Bucket: this.bucket, Key, UploadId: uploadId }))
          .catch(() => undefined);
      }
      throw err;
    }
  }

  async get(key: string): Promise<Uint8Array | undefined> {
    try {
      const out = await this.client.send(
        new GetObjectCommand({ Bucket: this.bucket, Key: this.fullKey(key) }),
      );
      return out.Body ? await out.Body.transformToByteArray() : new Uint8Array();
    } catch (err) {
      if (err instanceof NoSuchKey) return undefined;
      throw err;
    }
  }

  /**
   * A GetObject of the first byte: the grant and request price of a HeadObject, with an error code in
   * the answer (a HEAD's errors have no body). S3 answers NoSuchKey for a missing key only given
   * s3:ListBucket on it, else AccessDenied.
   */
  async exists(key: string): Promise<boolean> {
    try {
      const out = await this.client.send(
        new GetObjectCommand({ Bucket: this.bucket, Key: this.fullKey(key), Range: "bytes=0-0" }),
      );
      await out.Body?.transformToByteArray(); // frees the connection
      return true;
    } catch (err) {
      if (err instanceof NoSuchKey) return false;
      // An empty object has no first byte.
      if (err instanceof S3ServiceException && err.name === "InvalidRange") return true;
      throw err;
    }
  }

  async *list(prefix: string): AsyncIterable<ObjectInfo> {
    let ContinuationToken: string | undefined;
    do {
      const page = await this.client.send(
        new ListObjectsV2Command({ Bucket: this.bucket, Prefix: this.prefix + prefix, ContinuationToken }),
      );
      for (const object of page.Contents ?? []) {
        if (object.Key) yield { key: object.Key.slice(this.prefix.length), size: object.Size ?? 0 };
      }
      ContinuationToken = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (ContinuationToken);
  }

  async delete(key: string): Promise<void> {
    await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: this.fullKey(key) }));
  }

  url(key: string): string {
    return `s3://${this.bucket}/${this.fullKey(key)}`;
  }

  /** `saveAs`: the name a browser saves the download as (`Content-Disposition: attachment`). */
  async downloadUrl(
    key: string,
    seconds: number,
    saveAs?: string,
  ): Promise<{ url: string; expiresAt: number }> {
    const credentials = await this.client.config.credentials();
    const region = await this.client.config.region();
    const now = this.clock();
    const url = presignS3Get({
      bucket: this.bucket,
      key: this.fullKey(key),
      region,
      credentials,
      now,
      expiresSeconds: seconds,
      ...(saveAs !== undefined && { saveAs }),
    });
    return { url, expiresAt: now + seconds * 1000 };
  }
}
