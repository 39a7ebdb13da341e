import { createHash, createHmac } from "node:crypto";
import { AthenaClient } from "@aws-sdk/client-athena";
import { S3Client } from "@aws-sdk/client-s3";
import { SQSClient } from "@aws-sdk/client-sqs";
import { SignatureV4 } from "@smithy/signature-v4";
import { S3ObjectStore } from "../../adapters/s3/object-store";
import { SqsRecordQueue } from "../../adapters/sqs/queue";
import { RecordSpool } from "../../adapters/sqs/spool";
import type { Logger } from "../../core/logger";
import { assertObjectKey, type ObjectBody, type ObjectStore } from "../../core/object-store";
import type { RecordQueueConfig } from "./config";

/**
 * The warehouse's AWS clients, shared by the handlers. Each takes an optional endpoint: unset in AWS,
 * set by tests to local stand-ins (S3 then needs path-style addressing).
 */
export function createS3Client(endpoint?: string): S3Client {
  return new S3Client(endpoint ? { endpoint, forcePathStyle: true } : {});
}

export function createSqsClient(endpoint?: string): SQSClient {
  return new SQSClient(endpoint ? { endpoint } : {});
}

export function createAthenaClient(endpoint?: string): AthenaClient {
  return new AthenaClient(endpoint ? { endpoint } : {});
}

/**
 * The producer: records go to the queue in batched sends; what the queue refuses after retries is kept
 * under `queue-spool/` of the warehouse bucket, which the spool re-sender (`spool.ts`) offers again on
 * a schedule. The proxy functions build one at cold start and pass `warehouseHooks(queue)`.
 */
export function createRecordQueue(config: RecordQueueConfig, logger: Logger): SqsRecordQueue {
  const sqs = createSqsClient(config.DMT_SQS_ENDPOINT);
  const writer = new S3SpoolWriter({
    bucket: config.DMT_WAREHOUSE_BUCKET,
    ...(config.DMT_S3_ENDPOINT !== undefined && { endpoint: config.DMT_S3_ENDPOINT }),
    // The function's own credentials and region, as the SQS client resolved them.
    credentials: sqs.config.credentials,
    region: sqs.config.region,
  });
  return new SqsRecordQueue(sqs, {
    queueUrl: config.DMT_QUEUE_URL,
    spool: new RecordSpool(writer, logger),
    logger,
  });
}

/** The spool re-sender's queue: it lists, reads, re-sends and removes what the producers spooled. */
export function createSpoolResender(config: RecordQueueConfig, logger: Logger): SqsRecordQueue {
  const spool = new RecordSpool(
    new S3ObjectStore(createS3Client(config.DMT_S3_ENDPOINT), config.DMT_WAREHOUSE_BUCKET),
    logger,
  );
  return new SqsRecordQueue(createSqsClient(config.DMT_SQS_ENDPOINT), {
    queueUrl: config.DMT_QUEUE_URL,
    spool,
    logger,
  });
}

export interface S3SpoolWriterOptions {
  bucket: string;
  /** Another S3 endpoint, addressed path style (tests); unset in AWS. */
  endpoint?: string;
  credentials: SQSClient["config"]["credentials"];
  region: SQSClient["config"]["region"];
}

/**
 * Writes spool objects, each with one SigV4-signed PutObject: all a proxy function does with S3, done
 * without the S3 client, which would add ~140 KB to the proxy bundle (its 1 MB budget has no room).
 * Signed by the SDK's own signer, with the function's credentials.
 */
export class S3SpoolWriter implements Pick<ObjectStore, "put"> {
  constructor(private readonly options: S3SpoolWriterOptions) {}

  async put(key: string, body: ObjectBody, contentType = "application/octet-stream"): Promise<void> {
    assertObjectKey(key);
    if (!(body instanceof Uint8Array)) throw new Error("A spool object is written whole.");
    const { bucket, endpoint } = this.options;
    const region = await this.options.region();
    const path = `/${key.split("/").map(encodeURIComponent).join("/")}`;
    const url = endpoint
      ? new URL(`${endpoint.replace(/\/+$/, "")}/${bucket}${path}`)
      : new URL(`https://${bucket}.s3.${region}.amazonaws.com${path}`);
    const signer = new SignatureV4({
      service: "s3",
      region,
      credentials: this.options.credentials,
      sha256: Sha256,
      // S3 takes the path as sent: no second encoding in the canonical request.
      uriEscapePath: false,
    });
    const signed = await signer.sign({
      method: "PUT",
      protocol: url.protocol,
      hostname: url.hostname,
      ...(url.port && { port: Number(url.port) }),
      path: url.pathname,
      query: {},
      headers: {
        host: url.host,
        "content-type": contentType,
        "x-amz-content-sha256": createHash("sha256").update(body).digest("hex"),
      },
      body,
    });
    // fetch sets Host from the URL itself (the same value as signed).
    const { host: _host, ...headers } = signed.headers;
    // slice(): a copy fetch's types accept (an ArrayBuffer, not any buffer, behind the view).
    const response = await fetch(url, { method: "PUT", headers, body: body.slice() });
    if (!response.ok) {
      const answer = await response.text();
      const code = /<Code>([^<]+)<\/Code>/.exec(answer)?.[1] ?? "no error code";
      throw new Error(`S3 refused the spool object: ${response.status} ${code}`);
    }
  }
}

type SourceData = string | ArrayBuffer | ArrayBufferView;

/** SHA-256, or HMAC-SHA-256 given a secret, for the signer, from node:crypto. */
class Sha256 {
  private readonly hash;

  constructor(secret?: SourceData) {
    this.hash = secret === undefined ? createHash("sha256") : createHmac("sha256", toBytes(secret));
  }

  update(data: SourceData): void {
    this.hash.update(toBytes(data));
  }

  async digest(): Promise<Uint8Array> {
    return this.hash.digest();
  }
}

function toBytes(data: SourceData): Uint8Array {
  if (typeof data === "string") return Buffer.from(data, "utf8");
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  return new Uint8Array(data);
}
