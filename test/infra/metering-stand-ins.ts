/**
 * Local stand-ins for the AWS services metering and the proxy's record spool speak to, on 127.0.0.1:
 * KMS (GenerateDataKey and Decrypt, with real AES-GCM wrapping bound to the key id and the encryption
 * context, refusing as KMS does) and S3 PutObject (checking each request's SigV4 signature with the
 * SDK's own signer, refusing a bad one with 403 as S3 does).
 */
import {
  type BinaryLike,
  createCipheriv,
  createDecipheriv,
  createHash,
  createHmac,
  randomBytes,
} from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { SignatureV4 } from "@smithy/signature-v4";

export const TEST_CREDENTIALS = { accessKeyId: "AKIDTEST", secretAccessKey: "test-secret-key" };

async function listen(handle: (req: IncomingMessage, body: Buffer, res: ServerResponse) => void) {
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => handle(req, Buffer.concat(chunks), res));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export interface KmsCall {
  operation: string;
  keyId: string | undefined;
  context: Record<string, string> | undefined;
}

export interface KmsStandIn {
  url: string;
  calls: KmsCall[];
  close(): Promise<void>;
}

/**
 * KMS's JSON protocol for GenerateDataKey and Decrypt. A wrapped key is AES-256-GCM under this
 * stand-in's master key, with the key id and the encryption context as authenticated data: so a
 * different context is an InvalidCiphertextException and a different key id an IncorrectKeyException.
 */
export async function startKmsStandIn(): Promise<KmsStandIn> {
  const master = randomBytes(32);
  const calls: KmsCall[] = [];
  const aad = (keyId: string, context: Record<string, string> = {}) =>
    Buffer.from(JSON.stringify([keyId, Object.entries(context).sort(([a], [b]) => (a < b ? -1 : 1))]));
  const server = await listen((req, body, res) => {
    const reply = (status: number, answer: object) => {
      const type = "__type" in answer ? { "x-amzn-errortype": String(answer.__type) } : {};
      res.writeHead(status, { "content-type": "application/x-amz-json-1.1", ...type });
      res.end(JSON.stringify(answer));
    };
    const operation = String(req.headers["x-amz-target"]).replace("TrentService.", "");
    const input = JSON.parse(body.toString("utf8")) as {
      KeyId?: string;
      EncryptionContext?: Record<string, string>;
      CiphertextBlob?: string;
    };
    calls.push({ operation, keyId: input.KeyId, context: input.EncryptionContext });
    if (operation === "GenerateDataKey" && input.KeyId) {
      const plaintext = randomBytes(32);
      const iv = randomBytes(12);
      const cipher = createCipheriv("aes-256-gcm", master, iv);
      cipher.setAAD(aad(input.KeyId, input.EncryptionContext));
      const sealed = Buffer.concat([cipher.update(plaintext), cipher.final()]);
      const keyId = Buffer.from(input.KeyId);
      const blob = Buffer.concat([Buffer.from([keyId.length]), keyId, iv, sealed, cipher.getAuthTag()]);
      return reply(200, {
        KeyId: input.KeyId,
        Plaintext: plaintext.toString("base64"),
        CiphertextBlob: blob.toString("base64"),
      });
    }
    if (operation === "Decrypt" && input.CiphertextBlob) {
      const blob = Buffer.from(input.CiphertextBlob, "base64");
      const length = blob[0] ?? 0;
      const keyId = blob.subarray(1, 1 + length).toString();
      if (input.KeyId !== undefined && input.KeyId !== keyId) {
        return reply(400, { __type: "IncorrectKeyException", message: "The key ID does not match." });
      }
      try {
        const rest = blob.subarray(1 + length);
        const decipher = createDecipheriv("aes-256-gcm", master, rest.subarray(0, 12));
        decipher.setAAD(aad(keyId, input.EncryptionContext));
        decipher.setAuthTag(rest.subarray(rest.length - 16));
        const plaintext = Buffer.concat([
          decipher.update(rest.subarray(12, rest.length - 16)),
          decipher.final(),
        ]);
        return reply(200, { KeyId: keyId, Plaintext: plaintext.toString("base64") });
      } catch {
        return reply(400, { __type: "InvalidCiphertextException", message: "" });
      }
    }
    reply(400, { __type: "UnsupportedOperationException", message: `${operation} is not served here.` });
  });
  return { ...server, calls };
}

export interface S3StandIn {
  url: string;
  /** `bucket/key` -> body, for every PUT whose signature checked out. */
  objects: Map<string, Buffer>;
  /** PUTs refused for a bad signature or payload hash. */
  refused: number;
  close(): Promise<void>;
}

type SourceData = string | ArrayBuffer | ArrayBufferView;
const binary = (data: SourceData): BinaryLike => {
  if (typeof data === "string") return data;
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  return new Uint8Array(data);
};

/** The signer's hash, from node:crypto. */
class Sha256 {
  private readonly hash;
  constructor(secret?: SourceData) {
    this.hash = secret === undefined ? createHash("sha256") : createHmac("sha256", binary(secret));
  }
  update(data: SourceData): void {
    this.hash.update(binary(data));
  }
  async digest(): Promise<Uint8Array> {
    return this.hash.digest();
  }
}

/**
 * S3's PutObject, path style, for requests signed with `TEST_CREDENTIALS` in `region`: the request is
 * signed again here, over the headers it says it signed and at the time it says, and must match.
 */
export async function startS3StandIn(region: string): Promise<S3StandIn> {
  const objects = new Map<string, Buffer>();
  let refused = 0;
  const server = await listen(async (req, body, res) => {
    const deny = (code: string) => {
      refused++;
      res.writeHead(403, { "content-type": "application/xml" });
      res.end(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code></Error>`);
    };
    if (req.method !== "PUT") return deny("MethodNotAllowed");
    const authorization = String(req.headers.authorization ?? "");
    const signedNames = /SignedHeaders=([^,]+)/.exec(authorization)?.[1]?.split(";") ?? [];
    const payloadHash = createHash("sha256").update(body).digest("hex");
    if (req.headers["x-amz-content-sha256"] !== payloadHash) return deny("XAmzContentSHA256Mismatch");
    const stamp = String(req.headers["x-amz-date"]);
    const signingDate = new Date(
      `${stamp.slice(0, 4)}-${stamp.slice(4, 6)}-${stamp.slice(6, 8)}T${stamp.slice(9, 11)}:${stamp.slice(11, 13)}:${stamp.slice(13, 15)}Z`,
    );
    const url = new URL(req.url ?? "/", `http://${req.headers.host}`);
    const expected = await new SignatureV4({
      service: "s3",
      region,
      credentials: TEST_CREDENTIALS,
      sha256: Sha256,
      uriEscapePath: false,
    }).sign(
      {
        method: "PUT",
        protocol: "http:",
        hostname: url.hostname,
        port: Number(url.port),
        path: url.pathname,
        query: {},
        headers: Object.fromEntries(signedNames.map((name) => [name, String(req.headers[name])])),
        body,
      },
      { signingDate },
    );
    if (expected.headers.authorization !== authorization) return deny("SignatureDoesNotMatch");
    objects.set(decodeURIComponent(url.pathname.slice(1)), body);
    res.writeHead(200, { ETag: `"${createHash("md5").update(body).digest("hex")}"` });
    res.end();
  });
  return {
    ...server,
    objects,
    get refused() {
      return refused;
    },
  };
}

export interface EventBridgeStandIn {
  url: string;
  /** Every entry put, as sent. */
  entries: { EventBusName: string; Source: string; DetailType: string; Detail: string }[];
  close(): Promise<void>;
}

/**
 * EventBridge's JSON protocol for PutEvents: notes every entry and accepts it. Given a region, it also
 * checks each request's SigV4 signature (service `events`, TEST_CREDENTIALS) with the SDK's own
 * signer, refusing a bad one as EventBridge does.
 */
export async function startEventBridgeStandIn(verify?: { region: string }): Promise<EventBridgeStandIn> {
  const entries: EventBridgeStandIn["entries"] = [];
  const server = await listen(async (req, body, res) => {
    const reply = (status: number, answer: object) => {
      res.writeHead(status, { "content-type": "application/x-amz-json-1.1" });
      res.end(JSON.stringify(answer));
    };
    if (req.headers["x-amz-target"] !== "AWSEvents.PutEvents") {
      return reply(400, { __type: "UnsupportedOperation", message: "PutEvents only" });
    }
    if (verify) {
      const authorization = String(req.headers.authorization ?? "");
      const signedNames = /SignedHeaders=([^,]+)/.exec(authorization)?.[1]?.split(";") ?? [];
      const stamp = String(req.headers["x-amz-date"]);
      const signingDate = new Date(
        `${stamp.slice(0, 4)}-${stamp.slice(4, 6)}-${stamp.slice(6, 8)}T${stamp.slice(9, 11)}:${stamp.slice(11, 13)}:${stamp.slice(13, 15)}Z`,
      );
      const url = new URL(req.url ?? "/", `http://${req.headers.host}`);
      const expected = await new SignatureV4({
        service: "events",
        region: verify.region,
        credentials: TEST_CREDENTIALS,
        sha256: Sha256,
      }).sign(
        {
          method: "POST",
          protocol: "http:",
          hostname: url.hostname,
          port: Number(url.port),
          path: url.pathname,
          query: {},
          headers: Object.fromEntries(signedNames.map((name) => [name, String(req.headers[name])])),
          body: body.toString("utf8"),
        },
        { signingDate },
      );
      if (expected.headers.authorization !== authorization) {
        return reply(403, { __type: "InvalidSignatureException", message: "The signature does not match." });
      }
    }
    const input = JSON.parse(body.toString("utf8")) as { Entries: EventBridgeStandIn["entries"] };
    entries.push(...input.Entries);
    reply(200, {
      FailedEntryCount: 0,
      Entries: input.Entries.map((_, i) => ({ EventId: `e${entries.length}-${i}` })),
    });
  });
  return { ...server, entries };
}
