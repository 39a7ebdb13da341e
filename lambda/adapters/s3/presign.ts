import { createHash, createHmac } from "node:crypto";

export interface PresignCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
}

export interface PresignRequest {
  bucket: string;
  key: string;
  region: string;
  credentials: PresignCredentials;
  /** Signing time, epoch ms. */
  now: number;
  expiresSeconds: number;
  /**
   * Defaults to the regional virtual-hosted endpoint `<bucket>.s3.<region>.amazonaws.com`, or path style
   * for bucket names with dots (which the wildcard certificate does not cover).
   */
  host?: string;
}

/** RFC 3986 encoding as SigV4 wants it: everything but unreserved characters. */
function uriEncode(value: string): string {
  return encodeURIComponent(value).replace(
    /[!'()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
}

const hmac = (key: Buffer | string, data: string) => createHmac("sha256", key).update(data, "utf8").digest();

/**
 * A presigned S3 GET URL (SigV4 query authentication, UNSIGNED-PAYLOAD), the `download_url` of a
 * bucket export. S3 accepts at most 7 days; temporary credentials also end the URL's life when they expire.
 */
export function presignS3Get(req: PresignRequest): string {
  const pathStyle = req.host === undefined && req.bucket.includes(".");
  const host =
    req.host ??
    (pathStyle ? `s3.${req.region}.amazonaws.com` : `${req.bucket}.s3.${req.region}.amazonaws.com`);
  const amzDate = new Date(req.now)
    .toISOString()
    .replace(/[-:]/g, "")
    .replace(/\.\d{3}/, "");
  const day = amzDate.slice(0, 8);
  const scope = `${day}/${req.region}/s3/aws4_request`;
  const query: [string, string][] = [
    ["X-Amz-Algorithm", "AWS4-HMAC-SHA256"],
    ["X-Amz-Credential", `${req.credentials.accessKeyId}/${scope}`],
    ["X-Amz-Date", amzDate],
    ["X-Amz-Expires", String(Math.min(Math.max(1, Math.floor(req.expiresSeconds)), 604_800))],
    ["X-Amz-SignedHeaders", "host"],
  ];
  if (req.credentials.sessionToken) query.push(["X-Amz-Security-Token", req.credentials.sessionToken]);
  const canonicalQuery = query
    .map(([k, v]) => [uriEncode(k), uriEncode(v)] as const)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join("&");
  const keyPath = req.key.split("/").map(uriEncode).join("/");
  const path = pathStyle ? `/${req.bucket}/${keyPath}` : `/${keyPath}`;
  const canonicalRequest = ["GET", path, canonicalQuery, `host:${host}`, "", "host", "UNSIGNED-PAYLOAD"].join(
    "\n",
  );
  const stringToSign = [
    "AWS4-HMAC-SHA256",
    amzDate,
    scope,
    createHash("sha256").update(canonicalRequest, "utf8").digest("hex"),
  ].join("\n");
  let key = hmac(`AWS4${req.credentials.secretAccessKey}`, day);
  for (const part of [req.region, "s3", "aws4_request"]) key = hmac(key, part);
  const signature = createHmac("sha256", key).update(stringToSign, "utf8").digest("hex");
  return `https://${host}${path}?${canonicalQuery}&X-Amz-Signature=${signature}`;
}
