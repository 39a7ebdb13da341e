import { describe, expect, it } from "vitest";
import { ApiError } from "../../../lambda/core/errors";
import type { VendorName } from "../../../lambda/core/vendor-model";
import { VENDOR_DEFINITIONS } from "../../../lambda/vendors";
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

  it("looks one model up on every vendor, free, and never takes a model's method path for a lookup", () => {
    for (const [vendor, path, model] of [
      ["openai", "/v1/models/gpt-4o-mini", "gpt-4o-mini"],
      ["groq", "/v1/models/llama-3.3-70b-versatile", "llama-3.3-70b-versatile"],
      ["anthropic", "/v1/models/claude-sonnet-4-6", "claude-sonnet-4-6"],
      ["gemini", "/v1beta/models/gemini-2.5-flash", "gemini-2.5-flash"],
      ["gemini", "/v1/models/gemini-2.5-flash", "gemini-2.5-flash"],
    ] as const) {
      const match = matcher(vendor).match("GET", path);
      expect(match, path).toMatchObject({
        model,
        upstreamPath: path,
        route: { operation: "models", billing: "free" },
      });
    }
    // A method the path names is that route's (405 for GET), not a lookup of a model called `x:method`.
    expect(refusal(() => matcher("gemini").match("GET", "/v1beta/models/x:generateContent")).status).toBe(
      405,
    );
    expect(refusal(() => matcher("openai").match("GET", "/v1/models/a/b")).status).toBe(400);
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
