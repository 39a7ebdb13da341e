/**
 * The adapters' SigV4 signer (lambda/adapters/sigv4.ts): AWS's documented examples, and the same
 * signature as the SDK's own signer for the requests the proxy sends (S3 PutObject, EventBridge
 * PutEvents), with and without temporary credentials.
 */
import { createHash, createHmac } from "node:crypto";
import { SignatureV4 } from "@smithy/signature-v4";
import { describe, expect, it } from "vitest";
import {
  presignQuery,
  type SigningCredentials,
  SigningKeys,
  signHeaders,
} from "../../../lambda/adapters/sigv4";

type SourceData = string | ArrayBuffer | ArrayBufferView;
const bytes = (data: SourceData): Uint8Array => {
  if (typeof data === "string") return Buffer.from(data, "utf8");
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  return new Uint8Array(data);
};

/** The SDK signer's hash, from node:crypto. */
class Sha256 {
  private readonly hash;
  constructor(secret?: SourceData) {
    this.hash = secret === undefined ? createHash("sha256") : createHmac("sha256", bytes(secret));
  }
  update(data: SourceData): void {
    this.hash.update(bytes(data));
  }
  async digest(): Promise<Uint8Array> {
    return this.hash.digest();
  }
}

const EXAMPLE = {
  accessKeyId: "AKIAIOSFODNN7EXAMPLE",
  secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
};
const TEMPORARY: SigningCredentials = { ...EXAMPLE, sessionToken: "FwoGZXIvYXdzE/token+with=odd/chars" };
const NOW = Date.UTC(2026, 11, 7, 3, 4, 5);

describe("SigV4 as AWS documents it", () => {
  it("signs a GET in its headers (S3's header example)", () => {
    const headers = signHeaders(
      {
        method: "GET",
        host: "examplebucket.s3.amazonaws.com",
        path: "/test.txt",
        escapePath: false,
        headers: { range: "bytes=0-9" },
      },
      "",
      { service: "s3", region: "us-east-1", credentials: EXAMPLE, now: Date.UTC(2013, 4, 24) },
    );
    expect(headers.authorization).toBe(
      "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, " +
        "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, " +
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
    );
    expect(headers["x-amz-date"]).toBe("20130524T000000Z");
    expect(headers.host).toBeUndefined();
  });

  it("presigns a GET (S3's query example)", () => {
    const query = presignQuery(
      { method: "GET", host: "examplebucket.s3.amazonaws.com", path: "/test.txt", escapePath: false },
      { service: "s3", region: "us-east-1", credentials: EXAMPLE, now: Date.UTC(2013, 4, 24) },
      86400,
    );
    expect(new URLSearchParams(query).get("X-Amz-Signature")).toBe(
      "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404",
    );
  });
});

describe("the same signature as the SDK's signer", () => {
  const sdk = async (
    service: string,
    credentials: SigningCredentials,
    request: { method: string; path: string; headers: Record<string, string>; body: string | Uint8Array },
    uriEscapePath = true,
  ) => {
    const signed = await new SignatureV4({
      service,
      region: "eu-west-1",
      credentials,
      sha256: Sha256,
      uriEscapePath,
    }).sign(
      {
        method: request.method,
        protocol: "https:",
        hostname: "service.example",
        path: request.path,
        query: {},
        headers: { host: "service.example", ...request.headers },
        body: request.body,
      },
      { signingDate: new Date(NOW) },
    );
    const { host: _host, ...headers } = signed.headers;
    return headers;
  };
  const ours = (
    service: string,
    credentials: SigningCredentials,
    request: { method: string; path: string; headers: Record<string, string>; body: string | Uint8Array },
    escapePath = true,
  ) =>
    signHeaders(
      {
        method: request.method,
        host: "service.example",
        path: request.path,
        headers: request.headers,
        escapePath,
      },
      request.body,
      { service, region: "eu-west-1", credentials, now: NOW },
    );

  for (const [name, credentials] of [
    ["long-term", EXAMPLE],
    ["temporary", TEMPORARY],
  ] as const) {
    it(`an EventBridge PutEvents, ${name} credentials`, async () => {
      const request = {
        method: "POST",
        path: "/",
        headers: { "content-type": "application/x-amz-json-1.1", "x-amz-target": "AWSEvents.PutEvents" },
        body: JSON.stringify({ Entries: [{ Detail: '{"é":"ü  spaced"}' }] }),
      };
      expect(ours("events", credentials, request)).toEqual(await sdk("events", credentials, request));
    });

    it(`an S3 PutObject under an encoded key, ${name} credentials`, async () => {
      const request = {
        method: "PUT",
        path: `/bucket/queue-spool/${encodeURIComponent("a b+c=é")}/x.json`,
        headers: { "content-type": "application/octet-stream" },
        body: new TextEncoder().encode("spooled"),
      };
      expect(ours("s3", credentials, request, false)).toEqual(await sdk("s3", credentials, request, false));
    });
  }

  it("a path encoded once more for services other than S3", async () => {
    const request = { method: "POST", path: "/a%20b/./c/", headers: {}, body: "" };
    expect(ours("events", EXAMPLE, request)).toEqual(await sdk("events", EXAMPLE, request));
  });
});

describe("a signer's keys", () => {
  it("signs as a fresh key does after the day, the region or the credentials change", () => {
    const keys = new SigningKeys();
    const request = { method: "POST", host: "service.example", path: "/", headers: {} };
    const scopes = [
      { service: "events", region: "eu-west-1", credentials: EXAMPLE, now: NOW },
      { service: "events", region: "eu-west-1", credentials: EXAMPLE, now: NOW + 3_600_000 },
      { service: "events", region: "eu-west-1", credentials: EXAMPLE, now: NOW + 86_400_000 },
      { service: "events", region: "us-east-1", credentials: EXAMPLE, now: NOW + 86_400_000 },
      {
        service: "events",
        region: "us-east-1",
        credentials: { ...EXAMPLE, secretAccessKey: "rotated" },
        now: NOW,
      },
    ];
    const signatures = scopes.map((scope) => signHeaders(request, "{}", scope, keys).authorization);
    expect(signatures).toEqual(scopes.map((scope) => signHeaders(request, "{}", scope).authorization));
    expect(new Set(signatures).size).toBe(scopes.length);
  });
});

describe("a presigned S3 GET with a saved file name", () => {
  it("is the URL the SDK's signer presigns, response-content-disposition signed with the rest", async () => {
    const disposition = 'attachment; filename="dmt-export-acme-2026-01-01-to-2026-01-31.csv"';
    const query = presignQuery(
      { method: "GET", host: "bucket.s3.eu-west-1.amazonaws.com", path: "/a/b.csv", escapePath: false },
      { service: "s3", region: "eu-west-1", credentials: TEMPORARY, now: NOW },
      300,
      undefined,
      // The SDK's presigner moves its unsigned-payload header into the query; ours signs it the same.
      [
        ["response-content-disposition", disposition],
        ["x-amz-content-sha256", "UNSIGNED-PAYLOAD"],
      ],
    );
    const presigned = await new SignatureV4({
      service: "s3",
      region: "eu-west-1",
      credentials: TEMPORARY,
      sha256: Sha256,
      uriEscapePath: false,
      applyChecksum: false,
    }).presign(
      {
        method: "GET",
        protocol: "https:",
        hostname: "bucket.s3.eu-west-1.amazonaws.com",
        path: "/a/b.csv",
        query: { "response-content-disposition": disposition },
        // As S3's request presigner sends it: the payload unsigned, that header not signed.
        headers: { host: "bucket.s3.eu-west-1.amazonaws.com", "x-amz-content-sha256": "UNSIGNED-PAYLOAD" },
      },
      { signingDate: new Date(NOW), expiresIn: 300, unsignableHeaders: new Set(["x-amz-content-sha256"]) },
    );
    const ourParams = new URLSearchParams(query);
    expect(ourParams.get("response-content-disposition")).toBe(disposition);
    expect(ourParams.get("X-Amz-Signature")).toBe(presigned.query?.["X-Amz-Signature"]);
  });
});
