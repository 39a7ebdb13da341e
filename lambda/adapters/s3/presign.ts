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
  /**
   * The file name a browser saves the object as: S3 answers the GET with
   * `Content-Disposition: attachment; filename="<saveAs>"` (the signed `response-content-disposition`).
   */
  saveAs?: string;
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
  const extra: [string, string][] =
    req.saveAs === undefined ? [] : [["response-content-disposition", attachment(req.saveAs)]];
  const query = presignQuery(
    { method: "GET", host, path, escapePath: false },
    { service: "s3", region: req.region, credentials: req.credentials, now: req.now },
    req.expiresSeconds,
    undefined,
    extra,
  );
  return `https://${host}${path}?${query}`;
}

/** `attachment; filename="..."`, the name kept to characters that need no quoting or encoding. */
export function attachment(fileName: string): string {
  return `attachment; filename="${fileName.replace(/[^A-Za-z0-9._-]/g, "_")}"`;
}
