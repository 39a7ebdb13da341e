import { describe, expect, it } from "vitest";
import { forwardedQuery } from "../../../lambda/app/proxy/request";
import { ApiError } from "../../../lambda/core/errors";
import type { VendorName } from "../../../lambda/core/vendor-model";
import { VENDOR_DEFINITIONS } from "../../../lambda/vendors";
import { requestHeaderFilter, responseHeaders } from "../../../lambda/vendors/headers";
import { RouteMatcher } from "../../../lambda/vendors/routes";

const matcher = (vendor: VendorName) => new RouteMatcher(VENDOR_DEFINITIONS[vendor].routes);

function refusal(run: () => unknown): { status: number; code: string; headers: Record<string, string> } {
  try {
    run();
  } catch (err) {
    if (err instanceof ApiError) return { status: err.status, code: err.code, headers: err.headers };
    throw err;
  }
  throw new Error("expected a refusal");
}

describe("route tables", () => {
  it("declares every route of the issue, each matched to itself on the vendor", () => {
    const listed: Record<VendorName, string[]> = {
      groq: ["POST /v1/chat/completions", "POST /v1/responses", "GET /v1/models"],
      openai: [
        "POST /v1/chat/completions",
        "POST /v1/completions",
        "POST /v1/embeddings",
        "GET /v1/models",
        "POST /v1/audio/transcriptions",
        "POST /v1/audio/translations",
        "POST /v1/audio/speech",
        "POST /v1/images/generations",
        "POST /v1/images/edits",
        "POST /v1/images/variations",
        "POST /v1/moderations",
        "POST /v1/responses",
      ],
      anthropic: [
        "POST /v1/messages",
        "POST /v1/complete",
        "GET /v1/models",
        "POST /v1/messages/count_tokens",
      ],
      gemini: [
        "GET /v1/models",
        "GET /v1beta/models",
        "POST /v1beta/cachedContents",
        ...["v1", "v1beta"].flatMap((v) =>
          ["generateContent", "streamGenerateContent", "embedContent", "countTokens"].map(
            (m) => `POST /${v}/models/gemini-2.5-flash:${m}`,
          ),
        ),
      ],
    };
    for (const [vendor, routes] of Object.entries(listed) as [VendorName, string[]][]) {
      for (const line of routes) {
        const [method = "", path = ""] = line.split(" ");
        expect(matcher(vendor).match(method, path).upstreamPath, `${vendor} ${line}`).toBe(path);
      }
      for (const health of ["/health", `/${vendor}/health`]) {
        expect(matcher(vendor).match("GET", health).route.operation).toBe("health");
      }
    }
  });

  it("maps the spec's /v1/count_tokens to the vendor's own path", () => {
    expect(matcher("anthropic").match("POST", "/v1/count_tokens").upstreamPath).toBe(
      "/v1/messages/count_tokens",
    );
  });

  it("takes the Gemini model from the path", () => {
    const match = matcher("gemini").match("POST", "/v1beta/models/text-embedding-004:batchEmbedContents");
    expect(match.model).toBe("text-embedding-004");
    expect(match.route.operation).toBe("embed");
  });

  it("refuses unknown paths with 404 and other methods with 405 naming the allowed ones", () => {
    expect(refusal(() => matcher("openai").match("POST", "/v1/files")).status).toBe(404);
    expect(refusal(() => matcher("openai").match("GET", "/v1/chat/completions/x")).status).toBe(404);
    expect(refusal(() => matcher("groq").match("POST", "/v1/embeddings")).status).toBe(404);
    expect(
      refusal(() => matcher("gemini").match("POST", "/v1/models/gemini-2.5-flash:deleteEverything")).status,
    ).toBe(404);
    const wrongMethod = refusal(() => matcher("openai").match("GET", "/v1/chat/completions"));
    expect(wrongMethod).toMatchObject({
      status: 405,
      code: "method_not_allowed",
      headers: { Allow: "POST" },
    });
    expect(refusal(() => matcher("anthropic").match("DELETE", "/health")).headers.Allow).toBe("GET");
  });

  it("refuses a Gemini model segment that is not a model id", () => {
    for (const model of ["a/b", "../x", "a:b", "", "-x", "a b", "x".repeat(129)]) {
      expect(
        refusal(() => matcher("gemini").match("POST", `/v1beta/models/${model}:generateContent`)),
        model,
      ).toMatchObject({
        status: model === "" ? 404 : 400,
      });
    }
  });
});

describe("forwarded query", () => {
  it("drops the parameters that carry service keys and keeps the rest", () => {
    expect(
      forwardedQuery("http://h/openai/v1/models?api_key=dmt_x&limit=2&key=k", VENDOR_DEFINITIONS.openai),
    ).toBe("?limit=2");
    expect(forwardedQuery("http://h/openai/v1/models?api_key=dmt_x", VENDOR_DEFINITIONS.openai)).toBe("");
    expect(forwardedQuery("http://h/openai/v1/models?", VENDOR_DEFINITIONS.openai)).toBe("");
  });

  it("lets Gemini streams ask for SSE and nothing else", () => {
    expect(
      forwardedQuery(
        "http://h/gemini/v1beta/models/m:streamGenerateContent?alt=sse&key=k",
        VENDOR_DEFINITIONS.gemini,
      ),
    ).toBe("?alt=sse");
    for (const query of ["alt=json", "alt=proto", "%24alt=media", "alt=sse&alt=json", "alt="]) {
      expect(
        refusal(() => forwardedQuery(`http://h/x?${query}`, VENDOR_DEFINITIONS.gemini)),
        query,
      ).toMatchObject({
        status: 400,
        code: "invalid_field",
      });
    }
  });
});

describe("header hygiene", () => {
  const incoming = new Headers({
    authorization: "Bearer dmt_service_key",
    "x-api-key": "dmt_service_key",
    "x-goog-api-key": "dmt_service_key",
    cookie: "session=1",
    connection: "keep-alive",
    "keep-alive": "timeout=5",
    "transfer-encoding": "chunked",
    "accept-encoding": "gzip",
    "x-forwarded-for": "10.0.0.1",
    "content-type": "application/json",
    accept: "text/event-stream",
    "user-agent": "OpenAI/JS 6.49.0",
    "x-stainless-lang": "js",
    "x-stainless-retry-count": "0",
    "anthropic-beta": "prompt-caching-2024-07-31",
    "openai-organization": "org-1",
  });

  it("forwards only allowlisted headers and sets the vendor's own key header", () => {
    expect(requestHeaderFilter(VENDOR_DEFINITIONS.openai)(incoming, "sk-vendor")).toEqual({
      "content-type": "application/json",
      accept: "text/event-stream",
      "user-agent": "OpenAI/JS 6.49.0",
      "x-stainless-lang": "js",
      "x-stainless-retry-count": "0",
      "openai-organization": "org-1",
      authorization: "Bearer sk-vendor",
    });
    expect(requestHeaderFilter(VENDOR_DEFINITIONS.anthropic)(incoming, "sk-ant")).toMatchObject({
      "x-api-key": "sk-ant",
      "anthropic-beta": "prompt-caching-2024-07-31",
      "anthropic-version": "2023-06-01",
    });
    expect(requestHeaderFilter(VENDOR_DEFINITIONS.gemini)(incoming, "AIza")["x-goog-api-key"]).toBe("AIza");
  });

  it("sends no key header at all when there is no vendor key, never the service key", () => {
    const headers = requestHeaderFilter(VENDOR_DEFINITIONS.gemini)(incoming, undefined);
    expect(JSON.stringify(headers)).not.toContain("dmt_service_key");
    expect(headers["x-goog-api-key"]).toBeUndefined();
  });

  it("keeps the client's anthropic-version over the default", () => {
    const headers = requestHeaderFilter(VENDOR_DEFINITIONS.anthropic)(
      new Headers({ "anthropic-version": "2024-01-01" }),
      "k",
    );
    expect(headers["anthropic-version"]).toBe("2024-01-01");
  });

  it("passes vendor request ids and retry hints back, and nothing about the vendor account", () => {
    const upstream = {
      "content-type": "application/json",
      "content-length": "42",
      "x-request-id": "req_1",
      "request-id": "req_2",
      "retry-after": "3",
      "x-should-retry": "true",
      "set-cookie": ["__cf_bm=1", "x=2"],
      "openai-organization": "our-org",
      "anthropic-organization-id": "our-org",
      "x-ratelimit-remaining-requests": "99",
      "anthropic-ratelimit-tokens-remaining": "1",
      connection: "keep-alive",
      "transfer-encoding": "chunked",
      server: "cloudflare",
    };
    expect(responseHeaders(upstream, true)).toEqual({
      "content-type": "application/json",
      "content-length": "42",
      "x-request-id": "req_1",
      "request-id": "req_2",
      "retry-after": "3",
      "x-should-retry": "true",
    });
    expect(responseHeaders(upstream, false)["content-length"]).toBeUndefined();
  });
});
