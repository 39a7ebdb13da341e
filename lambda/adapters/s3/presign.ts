import { presignQuery, type SigningCredentials, uriEncode } from "../sigv4";

export type PresignCredentials = SigningCredentials;

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

/**
 * A presigned S3 GET URL (SigV4 query authentication, UNSIGNED-PAYLOAD), the `download_url` of a
 * bucket export. S3 accepts at most 7 days; temporary credentials also end the URL's life when they expire.
 */
export function presignS3Get(req: PresignRequest): string {
  const pathStyle = req.host === undefined && req.bucket.includes(".");
  const host =
    req.host ??
    (pathStyle ? `s3.${req.region}.amazonaws.com` : `${req.bucket}.s3.${req.region}.amazonaws.com`);
  const keyPath = req.key.split("/").map(uriEncode).join("/");
  const path = pathStyle ? `/${req.bucket}/${keyPath}` : `/${keyPath}`;
  const query = presignQuery(
    { method: "GET", host, path, escapePath: false },
    { service: "s3", region: req.region, credentials: req.credentials, now: req.now },
    req.expiresSeconds,
  );
  return `https://${host}${path}?${query}`;
}
