import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import {
  errorBody,
  expectSecurityHeaders,
  jsonOf,
  rawRequest,
  send,
  type WireResponse,
} from "../support/http";

let stack: TestHost;
let auth: { Authorization: string };
let restrictedAuth: { Authorization: string };
beforeAll(async () => {
  stack = await startTestHost();
  auth = { Authorization: `Bearer ${(await stack.newKey()).key}` };
  restrictedAuth = { Authorization: `Bearer ${(await stack.newKey({ allow: ["openai:*"] })).key}` };
});
afterAll(() => stack.stop());

const NOT_FOUND = errorBody("not_found_error", "not_found", "The requested endpoint does not exist.");
const MALFORMED = errorBody("invalid_request_error", "malformed_request", "The HTTP request is malformed.");
const invalidPath = (why: string) =>
  errorBody("invalid_request_error", "invalid_path", `Invalid request path: ${why}`);
const DOT = invalidPath("dot segments ('.' or '..') are not allowed.");
const EMPTY_SEGMENT = invalidPath("empty path segments ('//') are not allowed.");
const ENCODED = invalidPath("encoded slashes, backslashes and NUL are not allowed.");

function expectError(res: WireResponse, status: number, body: unknown): void {
  expect(res.status).toBe(status);
  expect(res.headers["content-type"]).toMatch(/^application\/json/);
  expect(jsonOf(res)).toEqual(body);
  expectSecurityHeaders(res.headers);
}

async function expectStillServing(): Promise<void> {
  const res = await send(stack.port, { path: "/api/v1/status", headers: auth });
  expect(res.status).toBe(200);
}

describe("security headers and bodies on every status", () => {
  it("200", async () => {
    const res = await send(stack.port, { path: "/api/v1/status", headers: auth });
    expect(res.status).toBe(200);
    expectSecurityHeaders(res.headers);
  });

  it("400 (invalid path)", async () => {
    expectError(await send(stack.port, { path: "/api/v1/../v1/status", headers: auth }), 400, DOT);
  });

  it("401", async () => {
    const res = await send(stack.port, { path: "/api/v1/status" });
    expectError(
      res,
      401,
      errorBody(
        "authentication_error",
        "missing_api_key",
        "No API key provided. Send 'Authorization: Bearer <API_KEY>'.",
      ),
    );
  });

  it("403", async () => {
    expectError(
      await send(stack.port, { path: "/api/v1/status", headers: restrictedAuth }),
      403,
      errorBody(
        "permission_error",
        "insufficient_permissions",
        "This API key is not allowed to call api:/api/v1/status.",
      ),
    );
  });

  it.each(["/nope", "/v1/chat/completions", "/apix", "/files..txt"])("404 for %s", async (path) => {
    expectError(await send(stack.port, { path }), 404, NOT_FOUND);
  });

  it("404 for an unknown data API path with a valid key", async () => {
    expectError(await send(stack.port, { path: "/api/v1/nope", headers: auth }), 404, NOT_FOUND);
    expectError(await send(stack.port, { path: "/api/v1/status/", headers: auth }), 404, NOT_FOUND);
  });

  it.each(["POST", "PUT", "PATCH", "DELETE"])("405 for %s on status, with Allow", async (method) => {
    const res = await send(stack.port, { method, path: "/api/v1/status", headers: auth, body: "{}" });
    expectError(
      res,
      405,
      errorBody(
        "method_not_allowed_error",
        "method_not_allowed",
        `Method ${method} is not allowed here; use GET.`,
      ),
    );
    expect(res.headers.allow).toBe("GET");
  });

  it("431 for 64 KB of headers", async () => {
    const res = await rawRequest(
      stack.port,
      `GET /api/v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${auth.Authorization}\r\nX-Padding: ${"a".repeat(64 * 1024)}\r\n\r\n`,
    );
    expectError(
      res,
      431,
      errorBody("invalid_request_error", "headers_too_large", "Request headers are too large."),
    );
    await expectStillServing();
  });

  it("431 for many small headers adding up to 64 KB", async () => {
    const many = Array.from({ length: 1024 }, (_, i) => `X-H${i}: ${"b".repeat(60)}\r\n`).join("");
    const res = await rawRequest(stack.port, `GET /api/v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\n${many}\r\n`);
    expect(res.status).toBe(431);
    expectSecurityHeaders(res.headers);
    await expectStillServing();
  });
});

describe("unsafe request paths are refused, not normalised", () => {
  it.each([
    ["/api/v1/../v1/status", DOT],
    ["/openai/../api/v1/status", DOT],
    ["/api/v1/./status", DOT],
    ["/api/v1/status/..", DOT],
    ["/api/v1/%2e%2e/v1/status", DOT],
    ["/api/v1/%2E%2E/v1/status", DOT],
    ["/api/v1/.%2e/v1/status", DOT],
    ["/api/v1/%2e/status", DOT],
    ["//api/v1/status", EMPTY_SEGMENT],
    ["/api//v1/status", EMPTY_SEGMENT],
    ["/api/v1/status//", EMPTY_SEGMENT],
    ["/api/v1%2Fstatus", ENCODED],
    ["/api/v1%2fstatus", ENCODED],
    ["/api/v1%5Cstatus", ENCODED],
    ["/api/v1/status%00", ENCODED],
    ["/api\\v1\\status", ENCODED],
  ])("%s", async (path, body) => {
    // A valid key: the refusal must come from the path, not from authentication.
    expectError(await send(stack.port, { path, headers: auth }), 400, body);
  });

  it("accepts dots inside a segment and dot segments in the query", async () => {
    const res = await send(stack.port, { path: "/api/v1/status?next=../../etc/passwd&x=%2F", headers: auth });
    expect(res.status).toBe(200);
  });

  it("reads the path of an absolute-form request target", async () => {
    const ok = await rawRequest(
      stack.port,
      `GET http://127.0.0.1/api/v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${auth.Authorization}\r\nConnection: close\r\n\r\n`,
    );
    expect(ok.status).toBe(200);
    const dots = await rawRequest(
      stack.port,
      `GET http://127.0.0.1/openai/../api/v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`,
    );
    expectError(dots, 400, DOT);
  });

  it("still answers afterwards", expectStillServing);
});

describe("malformed HTTP gets a 400 in the error shape", () => {
  it.each([
    ["a garbage request line", "HELLO THERE\r\n\r\n"],
    ["an unknown method", "FROB /api/v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"],
    ["HTTP/1.1 without Host", "GET /api/v1/status HTTP/1.1\r\nConnection: close\r\n\r\n"],
    ["HTTP/1.0 without Host", "GET /api/v1/status HTTP/1.0\r\n\r\n"],
    ["a Host that is not a host", "GET /api/v1/status HTTP/1.1\r\nHost: a/b@c\r\nConnection: close\r\n\r\n"],
    ["an asterisk target", "OPTIONS * HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"],
    ["a space in the header name", "GET /api/v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\nBad Name: x\r\n\r\n"],
    ["a bare LF in a header", "GET /api/v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: a\nb\r\n\r\n"],
    [
      "two different Content-Lengths",
      "POST /api/v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
    ],
  ])("%s", async (_case, request) => {
    expectError(await rawRequest(stack.port, request), 400, MALFORMED);
  });

  it("still answers afterwards", expectStillServing);
});
