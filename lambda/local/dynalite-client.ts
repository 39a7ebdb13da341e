import { Agent, request } from "node:http";
import type { MessagePort } from "node:worker_threads";
import {
  BatchGetItemCommand,
  BatchWriteItemCommand,
  ConditionalCheckFailedException,
  DeleteItemCommand,
  DynamoDBClient,
  DynamoDBServiceException,
  GetItemCommand,
  PutItemCommand,
  QueryCommand,
  ResourceInUseException,
  ResourceNotFoundException,
  ScanCommand,
  UpdateItemCommand,
} from "@aws-sdk/client-dynamodb";
import { createDynamoClient } from "../adapters/dynamodb/client";

/**
 * The store client of the embedded dynalite: the same DynamoDB client the adapters are written for,
 * whose item operations skip the AWS SDK's request pipeline: DynamoDB's JSON protocol, one keep-alive
 * node:http request each (undici would add 0.15 s of loading to every CLI command). On this loopback link
 * the SDK's middleware, schema serde and SigV4 signing cost 1.3–3 ms of CPU per operation here, the
 * plain request 0.3–0.5 ms, and dynalite answers it with half the CPU (bench/journal.md). Table
 * operations (ensureTables) go through the SDK.
 *
 * Given a message port to the store's worker (EmbeddedDynamo.connect), a thread of the process that
 * runs the store sends its item operations over the port instead: the same request to the same
 * handler, without the loopback socket.
 *
 * Only for our own dynalite: it checks that a request looks signed, not its signature. A store named by
 * DMT_DYNAMODB_ENDPOINT, and every store in AWS, gets the SDK's client (adapters/dynamodb/client.ts).
 */
export class DynaliteClient extends DynamoDBClient {
  private readonly url: URL;
  // dynalite's server keeps an idle connection 65 s (dynalite-server.mjs): we always close first, so a
  // request never goes out on a connection the server is closing.
  private readonly agent = new Agent({ keepAlive: true, maxSockets: 64, timeout: 10_000 });
  private readonly port: PortTransport | undefined;

  constructor(endpoint: string, port?: MessagePort) {
    super({
      region: "local",
      endpoint,
      credentials: { accessKeyId: "local", secretAccessKey: "local" },
    });
    this.url = new URL(endpoint);
    this.port = port && new PortTransport(port);
  }

  // The SDK's overloads (promise, callback) in one signature; a callback goes to the SDK.
  // biome-ignore lint/suspicious/noExplicitAny: overrides the SDK's overloaded send.
  override send(command: any, ...rest: any[]): any {
    const operation = ITEM_OPERATIONS.get(command.constructor);
    if (operation === undefined || rest.length > 0) return super.send(command, ...rest);
    return this.call(operation, command.input);
  }

  override destroy(): void {
    this.port?.close();
    this.agent.destroy();
    super.destroy();
  }

  private async call(operation: string, input: unknown): Promise<unknown> {
    const body = JSON.stringify(binaryAsBase64(input));
    const target = `DynamoDB_20120810.${operation}`;
    const { status, text } = await (this.port?.exchange(target, body) ?? this.overHttp(target, body));
    const $metadata = { httpStatusCode: status };
    if (status !== 200) throw storeError(text, $metadata);
    // Binary attribute values come back base64-encoded; the SDK hands them out as bytes.
    const output = JSON.parse(text, BINARY_VALUE.test(text) ? base64AsBinary : undefined);
    return Object.assign(output, { $metadata });
  }

  private overHttp(target: string, body: string): Promise<Answer> {
    return new Promise<Answer>((resolve, reject) => {
      const req = request(
        {
          host: this.url.hostname,
          port: this.url.port,
          path: "/",
          method: "POST",
          agent: this.agent,
          headers: {
            "content-type": "application/x-amz-json-1.0",
            "content-length": Buffer.byteLength(body),
            "x-amz-target": target,
            "x-amz-date": LOOKS_SIGNED.date,
            authorization: LOOKS_SIGNED.authorization,
          },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (chunk: Buffer) => chunks.push(chunk));
          res.on("end", () =>
            resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }),
          );
          res.on("error", reject);
        },
      );
      req.on("error", reject);
      req.end(body);
    });
  }
}

/** The store's answer to one request: its HTTP status and body. */
interface Answer {
  status: number;
  text: string;
}

/**
 * Requests over a message port to the store's worker (dynalite-server.mjs `serveOnPort`), answered by
 * id. The port holds the process open only while answers are awaited; if it closes (the store closed,
 * or its worker ended), the requests still waiting fail.
 */
class PortTransport {
  private readonly waiting = new Map<
    number,
    { resolve: (answer: Answer) => void; reject: (err: Error) => void }
  >();
  private nextId = 0;
  private closed = false;

  constructor(private readonly port: MessagePort) {
    port.on("message", ({ id, status, text }: Answer & { id: number }) => {
      const waiter = this.waiting.get(id);
      this.waiting.delete(id);
      if (this.waiting.size === 0) port.unref();
      waiter?.resolve({ status, text });
    });
    port.once("close", () => {
      this.closed = true;
      for (const waiter of this.waiting.values()) waiter.reject(new Error("the store closed"));
      this.waiting.clear();
    });
    port.unref();
  }

  exchange(target: string, body: string): Promise<Answer> {
    if (this.closed) return Promise.reject(new Error("the store closed"));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      if (this.waiting.size === 1) this.port.ref();
      this.port.postMessage({ id, target, body });
    });
  }

  close(): void {
    this.port.close();
  }
}

/** A `B` or `BS` key in DynamoDB JSON (not `BOOL`): only then is the reviver worth its cost. */
const BINARY_VALUE = /"BS?":/;

/** The operations taken off the SDK's path: the ones the adapters make while serving. */
const ITEM_OPERATIONS = new Map<unknown, string>([
  [GetItemCommand, "GetItem"],
  [PutItemCommand, "PutItem"],
  [UpdateItemCommand, "UpdateItem"],
  [DeleteItemCommand, "DeleteItem"],
  [QueryCommand, "Query"],
  [ScanCommand, "Scan"],
  [BatchGetItemCommand, "BatchGetItem"],
  [BatchWriteItemCommand, "BatchWriteItem"],
]);

/** dynalite wants an Authorization header's shape and a date; it verifies neither. */
const LOOKS_SIGNED = {
  date: "20200101T000000Z",
  authorization:
    "AWS4-HMAC-SHA256 Credential=local/20200101/local/dynamodb/aws4_request, SignedHeaders=host, Signature=0",
};

/** The exceptions the adapters tell apart, as the SDK would have thrown them. */
const MODELLED = new Map<string, new (options: ErrorOptions) => DynamoDBServiceException>([
  ["ConditionalCheckFailedException", ConditionalCheckFailedException],
  ["ResourceNotFoundException", ResourceNotFoundException],
  ["ResourceInUseException", ResourceInUseException],
]);

interface ErrorOptions {
  message: string;
  $metadata: { httpStatusCode?: number };
}

function storeError(text: string, $metadata: { httpStatusCode?: number }): DynamoDBServiceException {
  let body: { __type?: string; message?: string; Message?: string } = {};
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON: reported by its status below
  }
  const name = body.__type?.slice(body.__type.lastIndexOf("#") + 1) ?? "UnknownError";
  const message = body.message ?? body.Message ?? `dynalite answered ${$metadata.httpStatusCode}`;
  const modelled = MODELLED.get(name);
  if (modelled) return new modelled({ message, $metadata });
  const fault = ($metadata.httpStatusCode ?? 500) >= 500 ? "server" : "client";
  return new DynamoDBServiceException({ name, $fault: fault, message, $metadata });
}

/**
 * A copy of a request with its bytes as base64, for a JSON.stringify without a replacer. A replacer
 * comes after a Buffer's `toJSON`, which makes an array of a number per byte: a BatchWriteItem of 25
 * items of 20 KB took 10.2 ms to stringify so, 2.6 ms this way (a throwaway micro-benchmark).
 */
function binaryAsBase64(value: unknown): unknown {
  if (value === null || typeof value !== "object") return value;
  if (value instanceof Uint8Array) {
    return Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString("base64");
  }
  if (Array.isArray(value)) return value.map(binaryAsBase64);
  const copy: Record<string, unknown> = {};
  for (const key of Object.keys(value)) copy[key] = binaryAsBase64((value as Record<string, unknown>)[key]);
  return copy;
}

/** JSON.parse's reviver: a `B` or `BS` attribute value (a string, never an item) as bytes. */
function base64AsBinary(key: string, value: unknown): unknown {
  if (key === "B" && typeof value === "string") return bytes(value);
  if (key === "BS" && Array.isArray(value) && value.every((v) => typeof v === "string"))
    return value.map(bytes);
  return value;
}

function bytes(base64: string): Uint8Array {
  const buffer = Buffer.from(base64, "base64");
  return new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength);
}

/**
 * The client for a local store: the lean one for the data dir's own dynalite (over `port` when given),
 * else the SDK's.
 */
export function storeClient(endpoint: string, dynalite: boolean, port?: MessagePort): DynamoDBClient {
  return dynalite ? new DynaliteClient(endpoint, port) : createDynamoClient({ endpoint });
}
