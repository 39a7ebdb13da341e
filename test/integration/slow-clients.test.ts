import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect as tlsConnect } from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseLocalConfig } from "../../lambda/local/config";
import { createHttpServer, type RunningServer } from "../../lambda/local/http-server";
import { errorBody, expectSecurityHeaders, jsonOf, rawRequest } from "../support/http";
import { writeLocalhostCertificate } from "../support/tls";

/**
 * Bounds on clients that hold connections without sending a request: the time to a complete request
 * head, and the connections one address may hold. The bounds here are short so the test is brief; the
 * test waits for the server to act and never for a fixed time, so a busy machine only makes it slower.
 */
const HEADERS_TIMEOUT_MS = 400;
const ok = () => new Response('{"status":"ok"}', { headers: { "content-type": "application/json" } });

let certDir: string;
beforeAll(() => {
  certDir = mkdtempSync(join(tmpdir(), "dmt-slow-"));
  writeLocalhostCertificate(certDir);
});
afterAll(() => rmSync(certDir, { recursive: true, force: true }));

async function serve(
  tls: boolean,
  overrides: { maxConnectionsPerClient?: number; headersTimeoutMs?: number } = {},
) {
  const server = createHttpServer({
    fetch: ok,
    ...(tls ? { tls: { cert: join(certDir, "cert.pem"), key: join(certDir, "key.pem") } } : {}),
    headersTimeoutMs: overrides.headersTimeoutMs ?? HEADERS_TIMEOUT_MS,
    maxConnectionsPerClient: overrides.maxConnectionsPerClient ?? 256,
  });
  return { server, port: await server.listen(0, "127.0.0.1") };
}

/** What a socket received by the time the server closed it, and how long that took. */
function closedBy(socket: Socket): Promise<{ text: string; afterMs: number }> {
  const opened = performance.now();
  const chunks: Buffer[] = [];
  socket.on("data", (chunk: Buffer) => chunks.push(chunk));
  socket.on("error", () => {});
  return new Promise((resolve) =>
    socket.once("close", () =>
      resolve({ text: Buffer.concat(chunks).toString("latin1"), afterMs: performance.now() - opened }),
    ),
  );
}

/** A slow-loris client: a request head that never ends, one header line at a time. */
function slowLoris(port: number): { socket: Socket } {
  let drip: NodeJS.Timeout | undefined;
  // The drip starts once the head's first line is written, so its lines follow it.
  const socket = connect(port, "127.0.0.1", () => {
    socket.write("GET /api/v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\n");
    drip = setInterval(() => socket.writable && socket.write("X-Drip: a\r\n"), 50);
  });
  socket.once("close", () => clearInterval(drip));
  return { socket };
}

const timedOut = errorBody(
  "invalid_request_error",
  "request_timeout",
  "The request head did not arrive in time.",
);

describe("time to a complete request head", () => {
  let running: RunningServer;
  afterAll(() => running?.close(0));

  it("closes slow-loris and silent connections on the plain port, answering 408 to a partial head", async () => {
    const { server, port } = await serve(false);
    running = server;
    const loris = Array.from({ length: 5 }, () => slowLoris(port));
    const silent = connect(port, "127.0.0.1");
    const [first, ...others] = await Promise.all([...loris.map((l) => closedBy(l.socket)), closedBy(silent)]);
    for (const closed of [first, ...others]) {
      // Closed by the bound, not before it: the drip never stopped on its own.
      expect(closed?.afterMs).toBeGreaterThanOrEqual(HEADERS_TIMEOUT_MS * 0.9);
    }
    const head = first?.text ?? "";
    expect(head).toMatch(/^HTTP\/1\.1 408 /);
    const res = await rawRequest(port, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    expect(res.status).toBe(200);
    const answer = head.slice(head.indexOf("\r\n\r\n") + 4);
    expect(JSON.parse(answer)).toEqual(timedOut);
    expectSecurityHeaders(
      Object.fromEntries(
        head
          .slice(0, head.indexOf("\r\n\r\n"))
          .split("\r\n")
          .slice(1)
          .map((line) => [
            line.slice(0, line.indexOf(":")).toLowerCase(),
            line.slice(line.indexOf(":") + 1).trim(),
          ]),
      ),
    );
    await server.close(0);
  });

  it("closes on the TLS port a silent connection, a stalled handshake and a slow head after the handshake", async () => {
    const { server, port } = await serve(true);
    running = server;
    const silent = connect(port, "127.0.0.1");
    // The first byte of a TLS record, then nothing: the handshake never completes.
    const stalled = connect(port, "127.0.0.1", () => stalled.write(Buffer.from([0x16, 0x03, 0x01])));
    const secure = tlsConnect({ port, host: "127.0.0.1", ca: readFileSync(join(certDir, "cert.pem")) }, () =>
      secure.write("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n"),
    );
    const [quiet, half, slow] = await Promise.all([closedBy(silent), closedBy(stalled), closedBy(secure)]);
    expect(quiet.afterMs).toBeGreaterThanOrEqual(HEADERS_TIMEOUT_MS * 0.9);
    expect(half.afterMs).toBeGreaterThanOrEqual(HEADERS_TIMEOUT_MS * 0.9);
    expect(slow.text).toMatch(/^HTTP\/1\.1 408 /);
    await server.close(0);
  });
});

describe("connections per client address", () => {
  it("closes connections past the limit with 429 and takes new ones once others closed", async () => {
    // A long head timeout, so the held connections stay until the test closes them.
    const { server, port } = await serve(false, { maxConnectionsPerClient: 3, headersTimeoutMs: 60_000 });
    try {
      const held = await Promise.all(
        Array.from(
          { length: 3 },
          () =>
            new Promise<Socket>((resolve) => {
              const socket = connect(port, "127.0.0.1", () => resolve(socket));
            }),
        ),
      );
      const refused = await rawRequest(
        port,
        "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
      );
      expect(refused.status).toBe(429);
      expect(jsonOf(refused)).toEqual(
        errorBody(
          "rate_limit_error",
          "too_many_connections",
          "Too many open connections from this address (at most 3).",
        ),
      );
      expectSecurityHeaders(refused.headers);
      const released = held.map((socket) => closedBy(socket));
      held[0]?.destroy();
      await released[0];
      // The server counts the close once its side sees it: retry until it has, as a client would.
      let res = await rawRequest(port, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
      while (res.status === 429) {
        await new Promise((resolve) => setTimeout(resolve, 20));
        res = await rawRequest(port, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
      }
      expect(res.status).toBe(200);
      for (const socket of held) socket.destroy();
    } finally {
      await server.close(0);
    }
  });

  it("reads both bounds from the configuration, with defaults", () => {
    const defaults = parseLocalConfig({});
    expect(defaults.DMT_HEADERS_TIMEOUT_MS).toBe(20_000);
    expect(defaults.DMT_MAX_CONNECTIONS_PER_CLIENT).toBe(256);
    expect(() => parseLocalConfig({ DMT_HEADERS_TIMEOUT_MS: "0" })).toThrow(/DMT_HEADERS_TIMEOUT_MS/);
    expect(() => parseLocalConfig({ DMT_MAX_CONNECTIONS_PER_CLIENT: "0" })).toThrow(
      /DMT_MAX_CONNECTIONS_PER_CLIENT/,
    );
  });
});
