import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Agent, request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createKey, createProject, revokeKey } from "../../lambda/core/accounts";
import { parseLocalConfig } from "../../lambda/local/config";
import { runningStoreEndpoint, startEmbeddedDynamo } from "../../lambda/local/embedded-dynamo";
import { createHttpServer } from "../../lambda/local/http-server";
import { openLocalStore } from "../../lambda/local/store";
import { startTestHost, type TestHost } from "../support/host";
import { errorBody, expectSecurityHeaders, jsonOf, rawRequest, send } from "../support/http";
import { startTcpGate } from "../support/tcp-gate";
import { writeLocalhostCertificate } from "../support/tls";

const temp = (prefix: string) => mkdtempSync(join(tmpdir(), prefix));
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** Matches store calls whose bytes mention `text` (a key id: its read, then its last-used write). */
const mentioning = (text: string) => (chunk: Buffer) => chunk.includes(text);

describe("TLS", () => {
  let certDir: string;
  let stack: TestHost;
  let key: string;
  let https: Agent;
  beforeAll(async () => {
    certDir = temp("dmt-tls-");
    writeLocalhostCertificate(certDir);
    stack = await startTestHost({
      DMT_TLS_CERT: join(certDir, "cert.pem"),
      DMT_TLS_KEY: join(certDir, "key.pem"),
    });
    ({ key } = await stack.newKey());
    // Trust exactly the certificate made above: this also proves the server presents it.
    https = new Agent({ connect: { ca: readFileSync(join(certDir, "cert.pem")) } });
  });
  afterAll(async () => {
    await https.close();
    await stack.stop();
    rmSync(certDir, { recursive: true, force: true });
  });

  it("serves status over HTTPS with the security headers", async () => {
    expect(stack.url).toBe(`https://127.0.0.1:${stack.port}`);
    const res = await request(`${stack.url}/api/v1/status`, {
      headers: { authorization: `Bearer ${key}` },
      dispatcher: https,
    });
    expect(res.statusCode).toBe(200);
    expect(await res.body.json()).toMatchObject({ status: "ok" });
    expect(res.headers["strict-transport-security"]).toBe("max-age=31536000");
    expect(res.headers["x-frame-options"]).toBe("DENY");
  });

  it("answers plain HTTP on the same port with a 308 to the HTTPS URL", async () => {
    const res = await send(stack.port, {
      path: "/api/v1/status?x=1",
      headers: { Host: `127.0.0.1:${stack.port}`, Authorization: `Bearer ${key}` },
    });
    expect(res.status).toBe(308);
    expect(res.headers.location).toBe(`https://127.0.0.1:${stack.port}/api/v1/status?x=1`);
    expectSecurityHeaders(res.headers);
  });

  it("redirects to its own address, never to the Host header or an absolute target the client sent", async () => {
    const evil = await send(stack.port, {
      path: "/api/v1/status?x=1",
      headers: { Host: "evil.example", Authorization: `Bearer ${key}` },
    });
    expect(evil.status).toBe(308);
    expect(evil.headers.location).toBe(`https://127.0.0.1:${stack.port}/api/v1/status?x=1`);
    const absolute = await rawRequest(
      stack.port,
      "GET http://evil.example/x HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n",
    );
    expect(absolute.status).toBe(308);
    expect(absolute.headers.location).toBe(`https://127.0.0.1:${stack.port}/`);
  });

  it("redirects to DMT_PUBLIC_URL when it is set", async () => {
    const server = createHttpServer({
      fetch: () => new Response("never"),
      tls: { cert: join(certDir, "cert.pem"), key: join(certDir, "key.pem") },
      publicUrl: "https://api.example.com/",
      headersTimeoutMs: 20_000,
      maxConnectionsPerClient: 256,
    });
    const port = await server.listen(0, "127.0.0.1");
    try {
      const res = await send(port, { path: "/openai/v1/models", headers: { Host: "evil.example" } });
      expect(res.status).toBe(308);
      expect(res.headers.location).toBe("https://api.example.com/openai/v1/models");
    } finally {
      await server.close(0);
    }
    expect(parseLocalConfig({ DMT_PUBLIC_URL: "https://api.example.com" }).DMT_PUBLIC_URL).toBe(
      "https://api.example.com",
    );
    for (const bad of ["http://api.example.com", "https://api.example.com/base", "https://a.example?x=1"]) {
      expect(() => parseLocalConfig({ DMT_PUBLIC_URL: bad }), bad).toThrow(/DMT_PUBLIC_URL/);
    }
  });

  it("refuses oversized headers in the error shape, over HTTP and HTTPS alike", async () => {
    const plain = await rawRequest(
      stack.port,
      `GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: ${"a".repeat(64 * 1024)}\r\n\r\n`,
    );
    expect(plain.status).toBe(431);
    expectSecurityHeaders(plain.headers);
    const tls = await request(`${stack.url}/api/v1/status`, {
      headers: { "x-padding": "a".repeat(64 * 1024) },
      dispatcher: https,
    });
    expect(tls.statusCode).toBe(431);
    expect(await tls.body.json()).toEqual(
      errorBody("invalid_request_error", "headers_too_large", "Request headers are too large."),
    );
  });

  it("refuses malformed plain HTTP without redirecting it", async () => {
    const res = await rawRequest(stack.port, "HELLO\r\n\r\n");
    expect(res.status).toBe(400);
    expect(jsonOf(res)).toEqual(
      errorBody("invalid_request_error", "malformed_request", "The HTTP request is malformed."),
    );
  });
});

describe("restart", () => {
  it("keeps projects and keys, revocations included", async () => {
    const first = await startTestHost();
    const dir = first.dataDir;
    try {
      const kept = await first.newKey();
      const revoked = await first.newKey({ projectId: kept.projectId });
      await revokeKey(first.store, revoked.keyId, Date.now());
      await first.stop(true);
      expect(runningStoreEndpoint(dir)).toBeUndefined();

      const second = await startTestHost({}, dir);
      try {
        const ok = await fetch(`${second.url}/api/v1/status`, {
          headers: { Authorization: `Bearer ${kept.key}` },
        });
        expect(ok.status).toBe(200);
        expect(await ok.json()).toEqual({ status: "ok", project: kept.projectId });
        const refused = await fetch(`${second.url}/api/v1/status`, {
          headers: { Authorization: `Bearer ${revoked.key}` },
        });
        expect(refused.status).toBe(401);
        expect(await second.store.listKeys(kept.projectId)).toHaveLength(2);
      } finally {
        await second.stop(true);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("clean shutdown", () => {
  it("finishes a request in flight and its store writes before closing, and loses no write", async () => {
    const dir = temp("dmt-shutdown-");
    const dynamo = await startEmbeddedDynamo(dir);
    const gate = await startTcpGate(Number(new URL(dynamo.endpoint).port));
    try {
      // The server reaches the store through the gate, so a test can stop a store read midway.
      const stack = await startTestHost({ DMT_DYNAMODB_ENDPOINT: `http://127.0.0.1:${gate.port}` });
      await createProject(stack.store, "shutdown", "free", Date.now());
      const created = [];
      for (let i = 0; i < 5; i++) {
        created.push(await createKey(stack.store, { projectId: "shutdown", name: `k${i}` }, Date.now()));
      }
      const first = created[0];
      if (!first) throw new Error("no key created");

      // A key never looked up: authentication must read the store, and that read is held.
      const heldRead = gate.hold(mentioning(first.record.keyId));
      const inFlight = fetch(`${stack.url}/api/v1/status`, {
        headers: { Authorization: `Bearer ${first.key}` },
      });
      await heldRead;
      let closed = false;
      const closing = stack.stop().then(() => {
        closed = true;
      });
      await pause(200); // room for a faulty close to drop the request; a correct one waits
      expect(closed).toBe(false);

      // Let the request through but hold its last-used write, made after authentication.
      gate.release();
      const heldWrite = gate.hold(mentioning(first.record.keyId));
      const res = await inFlight;
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ status: "ok", project: "shutdown" });
      await heldWrite;
      await pause(200);
      expect(closed).toBe(false);
      gate.release();
      await closing;
      await expect(fetch(`${stack.url}/api/v1/status`)).rejects.toThrow();

      // Reopen the data dir afresh: every key is there, and the last-used write of the request too.
      await dynamo.close();
      const reopened = await openLocalStore(dir);
      try {
        const keys = await reopened.store.listKeys("shutdown");
        expect(keys.map((k) => k.keyId).sort()).toEqual(created.map((c) => c.record.keyId).sort());
        expect(keys.find((k) => k.keyId === first.record.keyId)?.lastUsedAt).toBeTypeOf("number");
      } finally {
        await reopened.close();
      }
    } finally {
      await gate.close();
      await dynamo.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
