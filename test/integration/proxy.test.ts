import { type AddressInfo, connect, createServer, type Server, type Socket } from "node:net";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { type Simulator, startSimulator } from "../../lambda/local/simulator";
import { simulatorEnv, startTestHost, type TestHost, testVendorKey } from "../support/host";
import { errorBody, expectSecurityHeaders, rawRequest, send } from "../support/http";

/**
 * A TCP relay in front of the simulator that shows what the proxy does on its upstream connections:
 * how many bytes the vendor had sent on a connection, and when the proxy closed it.
 */
interface UpstreamWatch {
  port: number;
  /** The connection of the next request whose bytes contain `marker` (call before sending it). */
  connection(marker: string): Promise<WatchedConnection>;
  close(): Promise<void>;
}
interface WatchedConnection {
  /** Bytes the vendor has sent to the proxy on this connection so far, and as text. */
  fromVendor(): number;
  vendorText(): string;
  /** Resolves when the proxy closed (or destroyed) this connection. */
  closedByProxy: Promise<void>;
}

async function startWatch(targetPort: number): Promise<UpstreamWatch> {
  const waiting: { marker: string; resolve: (c: WatchedConnection) => void }[] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((proxySide) => {
    const vendorSide = connect(targetPort, "127.0.0.1");
    sockets.add(proxySide).add(vendorSide);
    // Connections are kept alive across calls: a watched call sees only what came after its request.
    let vendorText = "";
    const closedByProxy = new Promise<void>((resolve) => proxySide.once("close", () => resolve()));
    proxySide.on("data", (chunk: Buffer) => {
      const request = chunk.toString("latin1");
      vendorSide.write(chunk);
      for (const w of waiting.filter((w) => request.includes(w.marker))) {
        waiting.splice(waiting.indexOf(w), 1);
        const start = vendorText.length;
        w.resolve({
          fromVendor: () => vendorText.length - start,
          vendorText: () => vendorText.slice(start),
          closedByProxy,
        });
      }
    });
    vendorSide.on("data", (chunk: Buffer) => {
      vendorText += chunk.toString("latin1");
      proxySide.write(chunk);
    });
    proxySide.on("close", () => vendorSide.destroy());
    vendorSide.on("close", () => proxySide.destroy());
    proxySide.on("error", () => {});
    vendorSide.on("error", () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as AddressInfo).port,
    /** Register before sending the marked request. */
    connection: (marker) => new Promise((resolve) => waiting.push({ marker, resolve })),
    close() {
      for (const socket of sockets) socket.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

let simulator: Simulator;
let watch: UpstreamWatch;
let stack: TestHost;
let key: string;

beforeAll(async () => {
  simulator = await startSimulator();
  watch = await startWatch(Number(new URL(simulator.url).port));
  stack = await startTestHost({
    ...simulatorEnv(simulator.origins),
    DMT_UPSTREAM_OPENAI: `http://127.0.0.1:${watch.port}/openai`,
  });
  key = (await stack.newKey()).key;
});
afterAll(async () => {
  await stack.stop();
  await watch.close();
  await simulator.close();
});
beforeEach(() => {
  simulator.reset();
  simulator.setChunkDelay(0);
});

const chat = (extra: Record<string, unknown> = {}) =>
  JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "user", content: "Say hello" }], ...extra });

function post(
  path: string,
  body: string | Uint8Array,
  headers: Record<string, string> = {},
  signal?: AbortSignal,
) {
  return fetch(`${stack.url}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json", ...headers },
    body: body as string | Uint8Array<ArrayBuffer>,
    ...(signal ? { signal } : {}),
  });
}

describe("health", () => {
  it("answers on both paths for every vendor, behind a key, without calling the vendor", async () => {
    for (const vendor of ["groq", "openai", "anthropic", "gemini"]) {
      for (const path of [`/${vendor}/health`, `/${vendor}/${vendor}/health`]) {
        const res = await fetch(`${stack.url}${path}`, { headers: { authorization: `Bearer ${key}` } });
        expect(res.status, path).toBe(200);
        expectSecurityHeaders(res.headers);
        expect(await res.json()).toEqual({ status: "ok", vendor, upstream: "configured" });
      }
      const anonymous = await fetch(`${stack.url}/${vendor}/health`);
      expect(anonymous.status).toBe(401);
    }
    expect(simulator.requests).toEqual([]);
  });
});

describe("forwarding", () => {
  it("passes a JSON body byte for byte and the vendor's answer back with its request id", async () => {
    const body = `{ "model":"gpt-4o-mini",\n  "messages":[{"role":"user","content":"h\\u00e9llo ✓"}], "temperature" : 0.5 }`;
    const res = await post("/openai/v1/chat/completions", body);
    expect(res.status).toBe(200);
    expectSecurityHeaders(res.headers);
    expect(res.headers.get("x-dmt-simulated")).toBe("true");
    expect(res.headers.get("x-request-id")).toMatch(/^req_/);
    expect((await res.json()).object).toBe("chat.completion");
    expect(simulator.requests.at(-1)?.body.toString()).toBe(body);
  });

  it("passes a multipart upload byte for byte", async () => {
    const boundary = "----dmt-test-boundary";
    const audio = Buffer.from([0, 1, 2, 255, 254, 13, 10, 45, 45]);
    const body = Buffer.concat([
      Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="model"\r\n\r\nwhisper-1\r\n`),
      Buffer.from(
        `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\nContent-Type: audio/wav\r\n\r\n`,
      ),
      audio,
      Buffer.from(`\r\n--${boundary}--\r\n`),
    ]);
    const res = await post("/openai/v1/audio/transcriptions", body, {
      "content-type": `multipart/form-data; boundary=${boundary}`,
    });
    expect(res.status).toBe(200);
    expect(simulator.requests.at(-1)?.body.equals(body)).toBe(true);
  });

  it("forwards an unknown model: the vendor decides", async () => {
    await post("/openai/v1/chat/completions", chat({ model: "no-such-model-2099" }));
    expect(JSON.parse(simulator.requests.at(-1)?.body.toString() ?? "{}").model).toBe("no-such-model-2099");
  });

  it("uses the vendor half of a dual key for that request", async () => {
    const res = await post("/groq/v1/chat/completions", chat(), {
      authorization: `Bearer ${key};gsk_callers_own`,
    });
    expect(res.status).toBe(200);
    expect(simulator.requests.at(-1)?.headers.authorization).toBe("Bearer gsk_callers_own");
  });

  it("answers a key restricted to other endpoints with 403, forwarding nothing", async () => {
    const restricted = await stack.newKey({ allow: ["openai:/v1/models"] });
    const res = await post("/openai/v1/chat/completions", chat(), {
      authorization: `Bearer ${restricted.key}`,
    });
    expect(res.status).toBe(403);
    expect(simulator.requests).toEqual([]);
  });
});

describe("routes the SDKs do not call", () => {
  it("streams Gemini without alt=sse as the vendor's JSON array, untouched", async () => {
    const res = await post(
      "/gemini/v1/models/gemini-2.5-flash:streamGenerateContent",
      '{"contents":[{"parts":[{"text":"hi"}]}]}',
    );
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^application\/json/);
    const chunks = JSON.parse(await res.text());
    expect(chunks.length).toBeGreaterThan(1);
    expect(chunks.at(-1).usageMetadata.totalTokenCount).toBeGreaterThan(0);
    expect(simulator.requests.at(-1)).toMatchObject({
      path: "/v1/models/gemini-2.5-flash:streamGenerateContent",
      query: "",
    });
  });

  it("creates a Gemini cached content and lists models on v1", async () => {
    const cached = await post(
      "/gemini/v1beta/cachedContents",
      '{"model":"models/gemini-2.5-flash","contents":[{"role":"user","parts":[{"text":"a long document"}]}]}',
    );
    expect(cached.status).toBe(200);
    const models = await fetch(`${stack.url}/gemini/v1/models`, {
      headers: { authorization: `Bearer ${key}` },
    });
    expect((await models.json()).models.length).toBeGreaterThan(0);
  });

  it("serves Anthropic's legacy completions and the spec's /v1/count_tokens", async () => {
    const headers = { "anthropic-version": "2023-06-01" };
    const complete = await post(
      "/anthropic/v1/complete",
      '{"model":"claude-2.1","max_tokens_to_sample":16,"prompt":"\\n\\nHuman: Hi\\n\\nAssistant:"}',
      headers,
    );
    expect(complete.status).toBe(200);
    expect((await complete.json()).completion).toEqual(expect.any(String));
    const counted = await post(
      "/anthropic/v1/count_tokens",
      '{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"hello"}]}',
      headers,
    );
    expect((await counted.json()).input_tokens).toBeGreaterThan(0);
    expect(simulator.requests.at(-1)?.path).toBe("/v1/messages/count_tokens");
  });
});

describe("header hygiene", () => {
  it("never sends the service key upstream, however it was presented", async () => {
    const presentations: [string, RequestInit][] = [
      [
        "/openai/v1/chat/completions",
        { method: "POST", headers: { authorization: `Bearer ${key}` }, body: chat() },
      ],
      [
        "/anthropic/v1/messages",
        {
          method: "POST",
          headers: { "x-api-key": key, "anthropic-version": "2023-06-01" },
          body: chat({ max_tokens: 8 }),
        },
      ],
      [
        "/gemini/v1beta/models/gemini-2.5-flash:generateContent",
        {
          method: "POST",
          headers: { "x-goog-api-key": key },
          body: '{"contents":[{"parts":[{"text":"hi"}]}]}',
        },
      ],
      [
        `/gemini/v1beta/models/gemini-2.5-flash:generateContent?key=${key}&alt=sse`,
        { method: "POST", body: '{"contents":[{"parts":[{"text":"hi"}]}]}' },
      ],
      [`/groq/v1/models?api_key=${key}`, { method: "GET" }],
    ];
    for (const [path, init] of presentations) {
      const res = await fetch(`${stack.url}${path}`, init);
      expect(res.status, path).toBe(200);
      await res.arrayBuffer();
    }
    expect(simulator.requests).toHaveLength(presentations.length);
    const secret = key.slice(key.lastIndexOf("_") + 1);
    for (const request of simulator.requests) {
      const seen = `${JSON.stringify(request.headers)} ${request.query} ${request.body.toString("latin1")}`;
      expect(seen).not.toContain(secret);
      expect(request.query).not.toMatch(/(^|&)(api_key|key)=/);
    }
    expect(simulator.requests[0]?.headers.authorization).toBe(`Bearer ${testVendorKey("openai")}`);
    expect(simulator.requests[1]?.headers["x-api-key"]).toBe(testVendorKey("anthropic"));
    expect(simulator.requests[3]?.query).toBe("alt=sse");
  });

  it("removes every case and encoding of api_key and key, and any dmt_ value, from query and headers", async () => {
    const query = [
      `API_KEY=${key}`,
      `Api_Key=${key}`,
      `%61pi%5Fkey=${key}`,
      `KEY=${key}`,
      `kEy=x`,
      `other=${encodeURIComponent(key)}`,
      `page=${key.slice(0, 20)}`,
      `alt=sse`,
    ].join("&");
    const res = await fetch(`${stack.url}/gemini/v1beta/models/gemini-2.5-flash:generateContent?${query}`, {
      method: "POST",
      headers: { "x-goog-api-key": key, "user-agent": `app ${key}`, "x-stainless-extra": key },
      body: '{"contents":[{"parts":[{"text":"hi"}]}]}',
    });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    const forwarded = simulator.requests.at(-1);
    expect(forwarded?.query).toBe("alt=sse");
    expect(forwarded?.headers["user-agent"]).toBeUndefined();
    expect(forwarded?.headers["x-stainless-extra"]).toBeUndefined();
    expect(JSON.stringify(forwarded?.headers)).not.toMatch(/dmt_/i);
  });

  it("forwards no hop-by-hop or unlisted request header and no vendor key to the client", async () => {
    const res = await post("/openai/v1/chat/completions", chat(), {
      cookie: "session=secret",
      "x-forwarded-for": "10.1.2.3",
      "accept-encoding": "gzip, br",
      "x-stainless-lang": "js",
      "openai-project": "proj_1",
    });
    const forwarded = simulator.requests.at(-1)?.headers ?? {};
    expect(forwarded.cookie).toBeUndefined();
    expect(forwarded["x-forwarded-for"]).toBeUndefined();
    expect(forwarded["accept-encoding"]).toBeUndefined();
    expect(forwarded["x-stainless-lang"]).toBe("js");
    expect(forwarded["openai-project"]).toBe("proj_1");
    const text = await res.text();
    const responseHeaders = JSON.stringify([...res.headers]);
    for (const vendor of ["openai", "groq", "anthropic", "gemini"]) {
      expect(responseHeaders + text).not.toContain(testVendorKey(vendor));
    }
  });

  it("gives every answer, whole or streamed, each security header once", async () => {
    for (const stream of [false, true]) {
      const body = chat(stream ? { stream: true } : {});
      const answer = await rawRequest(
        stack.port,
        `POST /openai/v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\n` +
          `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
      );
      expect(answer.status).toBe(200);
      // Repeated headers would read "DENY, DENY".
      expectSecurityHeaders(answer.headers);
    }
  });
});

describe("streams", () => {
  it("relays each chunk as the vendor sends it, not after the vendor finished", async () => {
    simulator.setChunkDelay(150);
    const watched = watch.connection("ordering-marker");
    const res = await post("/openai/v1/chat/completions", chat({ model: "ordering-marker", stream: true }));
    const connection = await watched;
    const reader = res.body?.getReader();
    if (!reader) throw new Error("no body");
    const first = await reader.read();
    expect(first.done).toBe(false);
    const vendorBytesAtFirstChunk = connection.fromVendor();
    let text = Buffer.from(first.value ?? []).toString();
    for (let next = await reader.read(); !next.done; next = await reader.read())
      text += Buffer.from(next.value).toString();
    expect(text).toContain("data: [DONE]");
    expect(vendorBytesAtFirstChunk).toBeLessThan(connection.fromVendor());
  });

  it("cancels the vendor's stream when the client goes away", async () => {
    simulator.setChunkDelay(200);
    const abort = new AbortController();
    const watched = watch.connection("abort-marker");
    const res = await post(
      "/openai/v1/chat/completions",
      chat({ model: "abort-marker", stream: true }),
      {},
      abort.signal,
    );
    const connection = await watched;
    expect((await res.body?.getReader().read())?.done).toBe(false);
    abort.abort();
    await connection.closedByProxy;
    // Closed while the vendor was still streaming: the answer never got to its end.
    expect(connection.vendorText()).toContain("data: ");
    expect(connection.vendorText()).not.toContain("data: [DONE]");
  });

  it("breaks the client's stream when the vendor resets mid-stream", async () => {
    simulator.inject({ vendor: "openai", fault: { kind: "resetMidStream", afterChunks: 2 } });
    const res = await post("/openai/v1/chat/completions", chat({ stream: true }));
    expect(res.status).toBe(200);
    await expect(res.text()).rejects.toThrow();
  });
});

describe("vendor errors pass through", () => {
  it.each([500, 429])("%i with the vendor's own body and retry hints", async (status) => {
    simulator.inject({
      vendor: "openai",
      fault: { kind: "status", status, headers: { "retry-after": "7" } },
    });
    const res = await post("/openai/v1/chat/completions", chat());
    expect(res.status).toBe(status);
    expect(res.headers.get("retry-after")).toBe("7");
    expectSecurityHeaders(res.headers);
    const body = await res.json();
    expect(body.error.message).toEqual(expect.any(String));
    expect(body.error.type).not.toBe("upstream_error");
  });
});

describe("bad inputs, refused before forwarding", () => {
  const expectRefused = async (
    res: Response | { status: number; body: string },
    status: number,
    code: string,
  ) => {
    expect(res.status).toBe(status);
    const body = "json" in res ? await res.json() : JSON.parse(res.body);
    expect(body.error.code).toBe(code);
    expect(simulator.requests).toEqual([]);
  };

  it("invalid JSON: 400", async () => {
    await expectRefused(
      await post("/openai/v1/chat/completions", '{"model": "gpt-4o-mini",'),
      400,
      "invalid_json",
    );
    await expectRefused(await post("/anthropic/v1/messages", "[1,2]"), 400, "invalid_json");
    await expectRefused(
      await post("/gemini/v1/models/gemini-2.5-flash:generateContent", ""),
      400,
      "invalid_json",
    );
  });

  it("a JSON body over the 20 MiB limit: 413", async () => {
    const big = `{"model":"gpt-4o-mini","input":"${"x".repeat(20 * 1024 * 1024)}"}`;
    await expectRefused(await post("/openai/v1/embeddings", big), 413, "payload_too_large");
  });

  it("an upload over the 25 MiB limit, declared or streamed: 413", async () => {
    const headers = { "content-type": "multipart/form-data; boundary=x" };
    const big = new Uint8Array(25 * 1024 * 1024 + 1);
    await expectRefused(
      await post("/openai/v1/audio/transcriptions", big, headers),
      413,
      "payload_too_large",
    );
    const streamed = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let i = 0; i < 27; i++) controller.enqueue(new Uint8Array(1024 * 1024));
        controller.close();
      },
    });
    const res = await fetch(`${stack.url}/openai/v1/images/edits`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, ...headers },
      body: streamed,
      duplex: "half",
    } as RequestInit);
    await expectRefused(res, 413, "payload_too_large");
  });

  it("multipart without a boundary: 400", async () => {
    const res = await post("/openai/v1/images/variations", "--x\r\n", {
      "content-type": "multipart/form-data",
    });
    await expectRefused(res, 400, "invalid_header");
    const json = await post("/openai/v1/audio/translations", "{}", { "content-type": "application/json" });
    await expectRefused(json, 400, "invalid_header");
  });

  it("dot segments and encoded slashes in paths: 400", async () => {
    for (const path of ["/openai/v1/../v1/models", "/openai/v1/%2e%2e/api/v1/status", "/openai//v1/models"]) {
      await expectRefused(
        await send(stack.port, { path, headers: { authorization: `Bearer ${key}` } }),
        400,
        "invalid_path",
      );
    }
  });

  it("a Gemini model segment with '/' or '%2F': 400", async () => {
    for (const model of ["models/gemini-2.5-flash", "x%2Fy", "x%2fy"]) {
      const res = await send(stack.port, {
        method: "POST",
        path: `/gemini/v1beta/models/${model}:generateContent`,
        headers: { "x-goog-api-key": key, "content-type": "application/json" },
        body: "{}",
      });
      await expectRefused(res, 400, "invalid_path");
    }
  });

  it("an alt parameter other than sse: 400", async () => {
    const res = await post("/gemini/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=json", "{}");
    await expectRefused(res, 400, "invalid_field");
  });

  it("methods not listed: 405 with Allow", async () => {
    for (const [method, path, allow] of [
      ["GET", "/openai/v1/chat/completions", "POST"],
      ["DELETE", "/anthropic/v1/models", "GET"],
      ["PUT", "/gemini/v1beta/cachedContents", "POST"],
      ["POST", "/groq/health", "GET"],
    ] as const) {
      const res = await fetch(`${stack.url}${path}`, { method, headers: { authorization: `Bearer ${key}` } });
      expect(res.headers.get("allow"), `${method} ${path}`).toBe(allow);
      await expectRefused(res, 405, "method_not_allowed");
    }
  });

  it("unknown paths under a prefix: 404 in our shape", async () => {
    for (const path of [
      "/openai/v1/files",
      "/groq/v1/embeddings",
      "/gemini/v2/models",
      "/anthropic/v1/messages/batches",
    ]) {
      const res = await post(path, "{}");
      expect(await res.clone().json()).toEqual(
        errorBody("not_found_error", "not_found", "The requested endpoint does not exist."),
      );
      await expectRefused(res, 404, "not_found");
    }
  });
});

describe("upstream failures", () => {
  let failing: TestHost;
  let failingKey: string;
  let deadPort: number;

  beforeAll(async () => {
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
    deadPort = (probe.address() as AddressInfo).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    failing = await startTestHost({
      ...simulatorEnv(simulator.origins),
      DMT_UPSTREAM_GROQ: `http://127.0.0.1:${deadPort}/openai`,
      DMT_UPSTREAM_IDLE_TIMEOUT_MS: "300",
    });
    failingKey = (await failing.newKey()).key;
  });
  afterAll(() => failing.stop());

  const call = (vendor: string) =>
    fetch(`${failing.url}/${vendor}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${failingKey}`, "content-type": "application/json" },
      body: chat(),
    });

  it("a vendor that never answers: 504 upstream_timeout", async () => {
    simulator.inject({ vendor: "openai", fault: { kind: "hang" } });
    const res = await call("openai");
    expect(res.status).toBe(504);
    expectSecurityHeaders(res.headers);
    expect(await res.json()).toEqual(
      errorBody("upstream_error", "upstream_timeout", "The openai upstream did not answer in time."),
    );
  });

  it("a first byte slower than the idle timeout: 504 upstream_timeout", async () => {
    simulator.inject({ vendor: "openai", fault: { kind: "slowFirstByte", ms: 5000 } });
    const res = await call("openai");
    expect(res.status).toBe(504);
    expect((await res.json()).error.code).toBe("upstream_timeout");
  });

  it("a vendor that cannot be reached: 502 upstream_unreachable", async () => {
    const res = await call("groq");
    expect(res.status).toBe(502);
    expect(await res.json()).toEqual(
      errorBody("upstream_error", "upstream_unreachable", "The groq upstream could not be reached."),
    );
  });
});

describe("browsers (CORS)", () => {
  const ORIGIN = "https://app.example";

  it("refuses a preflight before authentication, telling why, with no Access-Control-Allow-Origin", async () => {
    const before = simulator.requests.length;
    for (const path of [
      "/openai/v1/chat/completions",
      "/anthropic/v1/messages",
      "/gemini/v1beta/models/m:generateContent",
    ]) {
      const res = await fetch(`${stack.url}${path}`, {
        method: "OPTIONS",
        headers: {
          origin: ORIGIN,
          "access-control-request-method": "POST",
          "access-control-request-headers": "authorization, content-type",
        },
      });
      expect(res.status, path).toBe(403);
      expect(await res.json()).toEqual(
        errorBody(
          "permission_error",
          "cors_not_allowed",
          "Browser calls are not served: a service key in a web page can be read by anyone who loads it. Call the proxy from your backend.",
        ),
      );
      expect(res.headers.get("access-control-allow-origin")).toBeNull();
      expectSecurityHeaders(res.headers);
    }
    expect(simulator.requests.length).toBe(before);
  });

  it("grants no origin on a call either, and an OPTIONS that is no preflight stays a 405", async () => {
    const call = await post("/openai/v1/chat/completions", chat(), { origin: ORIGIN });
    expect(call.status).toBe(200);
    await call.arrayBuffer();
    expect(call.headers.get("access-control-allow-origin")).toBeNull();
    const options = await fetch(`${stack.url}/openai/v1/chat/completions`, {
      method: "OPTIONS",
      headers: { authorization: `Bearer ${key}` },
    });
    expect(options.status).toBe(405);
    expect(options.headers.get("allow")).toBe("POST");
  });
});
