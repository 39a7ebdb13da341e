import { describe, expect, it } from "vitest";
import { VENDOR_DEFINITIONS } from "../../../lambda/vendors";
import { requestHeaderFilter, responseHeaders } from "../../../lambda/vendors/headers";

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
