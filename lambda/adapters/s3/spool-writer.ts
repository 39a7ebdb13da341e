import type { SQSClient } from "@aws-sdk/client-sqs";
import { assertObjectKey, type ObjectBody, type ObjectStore } from "../../core/object-store";
import { SigningKeys, sendSigned } from "../sigv4";

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
 * Signed by the adapters' SigV4 signer (../sigv4.ts), with the function's credentials.
 */
export class S3SpoolWriter implements Pick<ObjectStore, "put"> {
  private readonly keys = new SigningKeys();

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
    const response = await sendSigned(
      { service: "s3", region, credentials: this.options.credentials, keys: this.keys },
      {
        method: "PUT",
        url,
        headers: { "content-type": contentType },
        body,
        // S3 takes the path as sent: no second encoding in the canonical request.
        escapePath: false,
      },
    );
    if (!response.ok) {
      const answer = await response.text();
      const code = /<Code>([^<]+)<\/Code>/.exec(answer)?.[1] ?? "no error code";
      throw new Error(`S3 refused the spool object: ${response.status} ${code}`);
    }
  }
}
