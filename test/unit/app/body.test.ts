import { describe, expect, it } from "vitest";
import { parseJsonBody, readBody, readJson, readJsonObject } from "../../../lambda/app/body";
import { createProxyApp } from "../../../lambda/app/proxy/app";
import { appShell } from "../../../lambda/app/shell";
import { silentLogger } from "../../../lambda/core/logger";
import { TIER_LIMITS } from "../../../lambda/core/model";
import { VENDOR_DEFINITIONS } from "../../../lambda/vendors";
import { errorBody, expectSecurityHeaders } from "../../support/http";

const LIMIT = 16;

function app() {
  const shell = appShell(silentLogger);
  shell.post("/raw", async (c) => c.json({ size: (await readBody(c, LIMIT)).byteLength }));
  shell.post("/json", async (c) => c.json({ value: await readJson(c, 1024) }));
  shell.post("/object", async (c) => c.json({ value: await readJsonObject(c, 1024) }));
  return shell;
}

function post(path: string, body: BodyInit, headers: Record<string, string> = {}) {
  return app().request(path, { method: "POST", body, headers, duplex: "half" } as RequestInit);
}

/** A chunked body: 10-byte chunks, `count` of them or without end. */
function chunks(count = Number.POSITIVE_INFINITY): ReadableStream<Uint8Array> {
  let sent = 0;
  return new ReadableStream({
    pull(controller) {
      if (sent++ >= count) controller.close();
      else controller.enqueue(new Uint8Array(10).fill(0x61));
    },
  });
}

const TOO_LARGE = errorBody(
  "invalid_request_error",
  "payload_too_large",
  `Request body exceeds the limit of ${LIMIT} bytes.`,
);

describe("readBody", () => {
  it("reads a body up to the limit", async () => {
    const res = await post("/raw", "x".repeat(LIMIT));
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ size: LIMIT });
  });

  it("refuses a declared Content-Length over the limit with 413 before reading", async () => {
    const res = await post("/raw", "small", { "Content-Length": String(LIMIT + 1) });
    expect(res.status).toBe(413);
    expect(await res.json()).toEqual(TOO_LARGE);
    expectSecurityHeaders(res.headers);
  });

  it("refuses a chunked body once it passes the limit", async () => {
    const res = await post("/raw", chunks(2));
    expect(res.status).toBe(413);
    expect(await res.json()).toEqual(TOO_LARGE);
    expectSecurityHeaders(res.headers);
  });

  it("stops reading an endless body at the limit", async () => {
    const res = await post("/raw", chunks());
    expect(res.status).toBe(413);
    expect(await res.json()).toEqual(TOO_LARGE);
  });
});

describe("readJson", () => {
  const invalidJson = (detail?: string) =>
    errorBody(
      "invalid_request_error",
      "invalid_json",
      `Request body is not valid JSON${detail ? `: ${detail}` : ""}.`,
    );

  it("accepts a leading UTF-8 byte order mark", async () => {
    const res = await post("/json", new Uint8Array([0xef, 0xbb, 0xbf, ...Buffer.from('{"a":1}')]));
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ value: { a: 1 } });
  });

  it.each([
    ["text/plain", { "Content-Type": "text/plain" }],
    ["form-encoded", { "Content-Type": "application/x-www-form-urlencoded" }],
    ["no type at all", {}],
  ])("parses JSON labelled %s", async (_case, headers) => {
    const res = await post("/json", new Blob(['{"a":[1,"b"]}']), headers);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ value: { a: [1, "b"] } });
  });

  it("refuses a body that is not JSON even when labelled JSON, without quoting it back", async () => {
    const res = await post("/json", "sk-secret-not-json", { "Content-Type": "application/json" });
    expect(res.status).toBe(400);
    const body = await res.text();
    expect(JSON.parse(body)).toEqual(invalidJson());
    expect(body).not.toContain("sk-secret");
    expectSecurityHeaders(res.headers);
  });

  it("refuses an empty body, a bare byte order mark, and bytes that are not UTF-8", async () => {
    expect(await (await post("/json", "")).json()).toEqual(invalidJson("the body is empty"));
    expect(await (await post("/json", new Uint8Array([0xef, 0xbb, 0xbf]))).json()).toEqual(invalidJson());
    const utf16 = new Uint8Array([0xff, 0xfe, 0x7b, 0x00, 0x7d, 0x00]);
    const res = await post("/json", utf16);
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual(invalidJson("the body is not valid UTF-8"));
  });
});

describe("readJsonObject", () => {
  it("accepts an object", async () => {
    expect(await (await post("/object", '{"reason":"x"}')).json()).toEqual({ value: { reason: "x" } });
  });

  it.each(["[1]", "null", '"text"', "3"])("refuses %s", async (json) => {
    const res = await post("/object", json);
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual(
      errorBody("invalid_request_error", "invalid_json", "The request body must be a JSON object."),
    );
  });
});

describe("one JSON body parser, on every path that parses a request body", () => {
  // The parser's own message quotes the body: what a secret pasted in the wrong place would leak.
  const BAD = '{"model":"gpt-4o-mini","api_key": sk-secret-0123456789}';
  const NOT_JSON = errorBody("invalid_request_error", "invalid_json", "Request body is not valid JSON.");

  it("is really a body the parser quotes", () => {
    expect(() => JSON.parse(BAD)).toThrow(/sk-secret/);
  });

  it("parseJsonBody answers 400 without the parser's message", () => {
    let thrown: unknown;
    try {
      parseJsonBody(Buffer.from(BAD));
    } catch (err) {
      thrown = err;
    }
    expect(JSON.stringify(thrown)).not.toContain("sk-secret");
    expect(thrown).toMatchObject({ status: 400, message: "Request body is not valid JSON." });
  });

  it.each(["/json", "/object"])("the data and dashboard APIs' reader (%s)", async (path) => {
    const res = await post(path, BAD, { "Content-Type": "application/json" });
    expect(res.status).toBe(400);
    const text = await res.text();
    expect(text).not.toContain("sk-secret");
    expect(JSON.parse(text)).toEqual(NOT_JSON);
  });

  it.each([
    ["openai", "/openai/v1/chat/completions"],
    ["anthropic", "/anthropic/v1/messages"],
    ["gemini", "/gemini/v1beta/models/gemini-2.5-flash:generateContent"],
    ["groq", "/groq/v1/chat/completions"],
  ] as const)("the proxy's JSON routes (%s)", async (vendor, path) => {
    const forwarded: string[] = [];
    const app = createProxyApp({
      vendor: VENDOR_DEFINITIONS[vendor],
      upstream: {
        request: async (request) => {
          forwarded.push(request.path);
          throw new Error("a body that is not JSON must not be forwarded");
        },
        close: async () => {},
      },
      upstreamState: "configured",
      auth: async (c, next) => {
        c.set("auth", {
          projectId: "proj-a",
          keyId: "abcdefghij012345",
          tier: "free",
          rateLimit: TIER_LIMITS.free,
          store: "full",
        });
        await next();
      },
      logger: silentLogger,
    });
    const res = await app.request(path, {
      method: "POST",
      body: BAD,
      headers: { "Content-Type": "application/json" },
    });
    expect(res.status).toBe(400);
    const text = await res.text();
    expect(text).not.toContain("sk-secret");
    expect(JSON.parse(text)).toEqual(NOT_JSON);
    expectSecurityHeaders(res.headers);
    expect(forwarded).toEqual([]);
  });
});
