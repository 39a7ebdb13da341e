import { createHash, createHmac } from "node:crypto";

/**
 * AWS Signature Version 4 for the requests made without an SDK client: the proxy's spool PUTs to S3
 * and its PutEvents to EventBridge (`sendSigned`, signed in an Authorization header), and the
 * presigned download URLs of exports (`presignQuery`). One canonical request, string to sign and
 * signing key for all of them, as AWS's "Create a signed AWS API request" describes them.
 */

/** Credentials as an SDK client's provider resolves them. */
export interface SigningCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string | undefined;
}

export interface SigningScope {
  service: string;
  region: string;
  credentials: SigningCredentials;
  /** Signing time, epoch ms. */
  now: number;
}

/** What a signature covers of the request line: the host and the path as sent (percent-encoded). */
export interface SignedTarget {
  method: string;
  host: string;
  path: string;
  /**
   * Encode the path once more in the canonical request, as every service but S3 wants (S3 takes the
   * path as sent). Default true.
   */
  escapePath?: boolean;
}

const ALGORITHM = "AWS4-HMAC-SHA256";
/** S3 accepts a presigned URL for at most 7 days. */
const MAX_PRESIGNED_SECONDS = 604_800;

/** RFC 3986 encoding as SigV4 wants it: everything but unreserved characters. */
export function uriEncode(value: string): string {
  return encodeURIComponent(value).replace(
    /[!'()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
}

const sha256Hex = (data: string | Uint8Array) => createHash("sha256").update(data).digest("hex");
const hmac = (key: Buffer | string, data: string) => createHmac("sha256", key).update(data, "utf8").digest();

/** `20130524T000000Z`: the signing time as SigV4 writes it. */
const longDate = (now: number) =>
  new Date(now)
    .toISOString()
    .replace(/[-:]/g, "")
    .replace(/\.\d{3}/, "");

/**
 * The signing key of a signer's last request: a key serves every request of its day, region, service
 * and credentials, and deriving one costs four HMACs. Each signer (an adapter) holds its own.
 */
export class SigningKeys {
  private last: { id: string; key: Buffer } | undefined;

  of(scope: SigningScope, day: string): Buffer {
    const { credentials, region, service } = scope;
    const id = [day, region, service, credentials.accessKeyId, credentials.secretAccessKey].join("\n");
    if (this.last?.id === id) return this.last.key;
    let key = hmac(`AWS4${credentials.secretAccessKey}`, day);
    for (const part of [region, service, "aws4_request"]) key = hmac(key, part);
    this.last = { id, key };
    return key;
  }
}

/** The path of the canonical request: as sent, or (escapePath) normalized and encoded once more. */
function canonicalPath(target: SignedTarget): string {
  if (target.escapePath === false) return target.path;
  const segments = target.path.split("/").filter((s) => s !== "" && s !== ".");
  const normalized: string[] = [];
  for (const segment of segments) {
    if (segment === "..") normalized.pop();
    else normalized.push(segment);
  }
  const trailing = normalized.length > 0 && target.path.endsWith("/") ? "/" : "";
  const path = `${target.path.startsWith("/") ? "/" : ""}${normalized.join("/")}${trailing}`;
  return uriEncode(path).replace(/%2F/g, "/");
}

/** Parameters encoded and sorted, `k=v&...`. */
function canonicalQuery(params: readonly (readonly [string, string])[]): string {
  return params
    .map(([k, v]) => `${uriEncode(k)}=${uriEncode(v)}`)
    .sort((a, b) => {
      const [ka, kb] = [a.slice(0, a.indexOf("=")), b.slice(0, b.indexOf("="))];
      return ka < kb ? -1 : ka > kb ? 1 : a < b ? -1 : a > b ? 1 : 0;
    })
    .join("&");
}

/** The signature of a canonical request, with the credential scope it names. */
function sign(scope: SigningScope, date: string, canonicalRequest: string, keys: SigningKeys) {
  const day = date.slice(0, 8);
  const credentialScope = `${day}/${scope.region}/${scope.service}/aws4_request`;
  const stringToSign = [ALGORITHM, date, credentialScope, sha256Hex(canonicalRequest)].join("\n");
  const signature = createHmac("sha256", keys.of(scope, day)).update(stringToSign, "utf8").digest("hex");
  return { credentialScope, signature };
}

/**
 * The headers that sign a request: the given ones with `x-amz-date`, `x-amz-content-sha256` (unless
 * given), `x-amz-security-token` with temporary credentials, and `authorization`. `host` is signed
 * but not returned: fetch sets it from the URL, to the same value.
 */
export function signHeaders(
  request: SignedTarget & { query?: readonly (readonly [string, string])[]; headers: Record<string, string> },
  body: string | Uint8Array,
  scope: SigningScope,
  keys = new SigningKeys(),
): Record<string, string> {
  const date = longDate(scope.now);
  const headers: Record<string, string> = { ...request.headers, "x-amz-date": date };
  if (scope.credentials.sessionToken) headers["x-amz-security-token"] = scope.credentials.sessionToken;
  headers["x-amz-content-sha256"] ??= sha256Hex(body);
  const canonical = Object.entries({ ...headers, host: request.host })
    .map(([name, value]) => [name.toLowerCase(), value.replace(/\s+/g, " ").trim()] as const)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const signedHeaders = canonical.map(([name]) => name).join(";");
  const canonicalRequest = [
    request.method,
    canonicalPath(request),
    canonicalQuery(request.query ?? []),
    ...canonical.map(([name, value]) => `${name}:${value}`),
    "",
    signedHeaders,
    headers["x-amz-content-sha256"],
  ].join("\n");
  const { credentialScope, signature } = sign(scope, date, canonicalRequest, keys);
  headers.authorization =
    `${ALGORITHM} Credential=${scope.credentials.accessKeyId}/${credentialScope}, ` +
    `SignedHeaders=${signedHeaders}, Signature=${signature}`;
  return headers;
}

/**
 * The query string of a presigned URL (query authentication, only `host` signed, UNSIGNED-PAYLOAD),
 * valid for `expiresSeconds` (1 s to 7 days); temporary credentials also end it when they expire.
 */
export function presignQuery(
  target: SignedTarget,
  scope: SigningScope,
  expiresSeconds: number,
  keys = new SigningKeys(),
  /** More query parameters, signed with the rest (S3's `response-content-disposition`, say). */
  extra: readonly [string, string][] = [],
): string {
  const date = longDate(scope.now);
  const day = date.slice(0, 8);
  const params: [string, string][] = [
    ["X-Amz-Algorithm", ALGORITHM],
    [
      "X-Amz-Credential",
      `${scope.credentials.accessKeyId}/${day}/${scope.region}/${scope.service}/aws4_request`,
    ],
    ["X-Amz-Date", date],
    ["X-Amz-Expires", String(Math.min(Math.max(1, Math.floor(expiresSeconds)), MAX_PRESIGNED_SECONDS))],
    ["X-Amz-SignedHeaders", "host"],
  ];
  if (scope.credentials.sessionToken) params.push(["X-Amz-Security-Token", scope.credentials.sessionToken]);
  params.push(...extra);
  const query = canonicalQuery(params);
  const canonicalRequest = [
    target.method,
    canonicalPath(target),
    query,
    `host:${target.host}`,
    "",
    "host",
    "UNSIGNED-PAYLOAD",
  ].join("\n");
  return `${query}&X-Amz-Signature=${sign(scope, date, canonicalRequest, keys).signature}`;
}

/**
 * Sends one request signed in its headers (a whole body, no streaming) with fetch, with the
 * function's credentials as an SDK client's provider resolves them.
 */
export async function sendSigned(
  signer: {
    service: string;
    region: string;
    credentials: () => Promise<SigningCredentials>;
    keys: SigningKeys;
  },
  request: {
    method: string;
    url: URL;
    /** Names in lower case. */
    headers: Record<string, string>;
    body: string | Uint8Array;
    escapePath?: boolean;
  },
): Promise<Response> {
  const { url, body } = request;
  const scope: SigningScope = {
    service: signer.service,
    region: signer.region,
    credentials: await signer.credentials(),
    now: Date.now(),
  };
  const target: SignedTarget = {
    method: request.method,
    host: url.host,
    path: url.pathname,
    ...(request.escapePath !== undefined && { escapePath: request.escapePath }),
  };
  const headers = signHeaders(
    { ...target, query: [...url.searchParams], headers: request.headers },
    body,
    scope,
  );
  // slice(): a copy fetch's types accept (an ArrayBuffer, not any buffer, behind the view).
  return fetch(url, {
    method: request.method,
    headers,
    body: typeof body === "string" ? body : body.slice(),
  });
}
