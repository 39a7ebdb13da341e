import { request as httpRequest, type OutgoingHttpHeaders } from "node:http";
import { connect } from "node:net";
import { expect } from "vitest";
import { SECURITY_HEADERS } from "../../lambda/app/security-headers";
import type { TestHost } from "./host";

/** A response as the wire carried it: header names lower-cased, repeated headers joined with ", ". */
export interface WireResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** The body parsed as JSON (throws if it is not). */
export function jsonOf(res: WireResponse): unknown {
  return JSON.parse(res.body);
}

/**
 * Writes `request` byte for byte on a fresh TCP connection and reads until the server closes it.
 * For what fetch and node:http refuse to send: NUL or non-ASCII header bytes, raw request targets,
 * missing Host, oversized headers. Send `Connection: close` so the server ends the exchange.
 */
export function rawRequest(port: number, request: string | Buffer): Promise<WireResponse> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1", () => socket.write(request));
    const chunks: Buffer[] = [];
    socket.on("data", (chunk: Buffer) => chunks.push(chunk));
    socket.on("error", reject);
    socket.on("close", () => {
      try {
        resolve(parseResponse(Buffer.concat(chunks)));
      } catch (err) {
        reject(err);
      }
    });
  });
}

function parseResponse(bytes: Buffer): WireResponse {
  const end = bytes.indexOf("\r\n\r\n");
  if (end === -1) throw new Error(`no complete response head in ${JSON.stringify(bytes.toString("latin1"))}`);
  const [statusLine = "", ...lines] = bytes.subarray(0, end).toString("latin1").split("\r\n");
  const status = Number(statusLine.split(" ")[1]);
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(":");
    const name = line.slice(0, colon).toLowerCase();
    const value = line.slice(colon + 1).trim();
    headers[name] = name in headers ? `${headers[name]}, ${value}` : value;
  }
  let body = bytes.subarray(end + 4);
  if (headers["transfer-encoding"] === "chunked") body = dechunk(body);
  return { status, headers, body: body.toString("utf8") };
}

function dechunk(bytes: Buffer): Buffer {
  const parts: Buffer[] = [];
  let at = 0;
  for (;;) {
    const lineEnd = bytes.indexOf("\r\n", at);
    const size = Number.parseInt(bytes.subarray(at, lineEnd).toString("latin1"), 16);
    if (!(size > 0)) return Buffer.concat(parts);
    parts.push(bytes.subarray(lineEnd + 2, lineEnd + 2 + size));
    at = lineEnd + 2 + size + 2;
  }
}

export interface SendOptions {
  method?: string;
  /** The request target exactly as sent: node:http does not normalise it. */
  path: string;
  /** An object, or a flat [name, value, name, value...] list to send a header twice. */
  headers?: OutgoingHttpHeaders | string[];
  body?: string | Buffer;
}

/**
 * node:http adds Host itself only to header objects, not to raw header lists; and it sends a DELETE
 * body with no length at all (the bytes would read as a next request), so the length is always set.
 */
function completeHeaders(options: SendOptions, port: number): OutgoingHttpHeaders | string[] {
  const headers = options.headers ?? {};
  const length = options.body === undefined ? undefined : String(Buffer.byteLength(options.body));
  if (!Array.isArray(headers))
    return length === undefined ? headers : { "Content-Length": length, ...headers };
  const hasHost = headers.some((h, i) => i % 2 === 0 && h.toLowerCase() === "host");
  return [
    ...(hasHost ? [] : ["Host", `127.0.0.1:${port}`]),
    ...(length === undefined ? [] : ["Content-Length", length]),
    ...headers,
  ];
}

/** One request through node:http on a fresh connection. */
export function send(port: number, options: SendOptions): Promise<WireResponse> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: "127.0.0.1",
        port,
        method: options.method ?? "GET",
        path: options.path,
        headers: completeHeaders(options, port),
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.on("error", reject);
        res.on("end", () => {
          const headers: Record<string, string> = {};
          for (const [name, value] of Object.entries(res.headers)) {
            if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(", ") : value;
          }
          resolve({ status: res.statusCode ?? 0, headers, body: Buffer.concat(chunks).toString("utf8") });
        });
      },
    );
    req.on("error", reject);
    req.end(options.body);
  });
}

/** The four headers the spec puts on every response. */
export function expectSecurityHeaders(headers: Record<string, string> | Headers): void {
  const get = (name: string) =>
    headers instanceof Headers ? headers.get(name) : headers[name.toLowerCase()];
  for (const [name, value] of Object.entries(SECURITY_HEADERS)) {
    expect(get(name), name).toBe(value);
  }
}

/** The service's error body. */
export function errorBody(type: string, code: string, message: string) {
  return { error: { message, type, code } };
}

/**
 * A proxied call's record as `GET /api/v1/transactions/{id}` answers it (with a key of its project),
 * once the call's after-work is done and the warehouse has it.
 */
export async function recordedCall(
  stack: TestHost,
  key: string,
  transactionId: string | null,
): Promise<Record<string, unknown>> {
  await stack.drain();
  let body: Record<string, unknown> = {};
  await expect
    .poll(
      async () => {
        const res = await fetch(`${stack.url}/api/v1/transactions/${transactionId}`, {
          headers: { authorization: `Bearer ${key}` },
        });
        body = (await res.json()) as Record<string, unknown>;
        return res.status;
      },
      { timeout: 30_000, interval: 100 },
    )
    .toBe(200);
  return body;
}
