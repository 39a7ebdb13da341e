import { describe, expect, it } from "vitest";
import { endpointAllowed, endpointOf, validatePattern } from "../../../lambda/core/endpoints";

describe("endpointOf", () => {
  it.each([
    ["/api/v1/status", "api:/api/v1/status"],
    ["/api", "api:/api"],
    ["/openai/v1/embeddings", "openai:/v1/embeddings"],
    ["/groq/v1/chat/completions", "groq:/v1/chat/completions"],
    // Groq's own SDK puts /openai before the path: the same endpoint, whichever SDK calls.
    ["/groq/openai/v1/chat/completions", "groq:/v1/chat/completions"],
    ["/groq/openai", "groq:/openai"],
    ["/openai/openai/v1/models", "openai:/openai/v1/models"],
    ["/anthropic/v1/messages", "anthropic:/v1/messages"],
    ["/gemini/v1beta/models/m:generateContent", "gemini:/v1beta/models/m:generateContent"],
    ["/openai", "openai:/"],
  ])("names %s as %s", (path, endpoint) => {
    expect(endpointOf(path)).toBe(endpoint);
  });

  it.each(["/", "/apix", "/apis/v1", "/mistral/v1/chat", "/OpenAI/v1/models"])(
    "leaves %s outside every family",
    (path) => {
      expect(endpointOf(path)).toBeUndefined();
    },
  );
});

describe("validatePattern", () => {
  it.each([
    "api:/api/v1/status",
    "openai:/v1/embeddings",
    "openai:*",
    "*:/v1/models",
    "gemini:/v1beta/models/*:generateContent",
    "anthropic:/v1/messages/count_tokens",
  ])("accepts %s", (pattern) => {
    expect(validatePattern(pattern)).toBeUndefined();
  });

  it.each([
    "",
    "*",
    "openai",
    "openai:",
    "openai:v1/models",
    "mistral:/v1/models",
    "openai:/v1/a b",
    "openai:/v1/models?x=1",
    "OPENAI:/v1/models",
  ])("refuses %j with the expected shape in the message", (pattern) => {
    expect(validatePattern(pattern)).toBe(
      `'${pattern}' is not '<family>:<path>' with family one of groq, openai, anthropic, gemini, api or '*', and a path starting with '/'`,
    );
  });

  it("refuses patterns over 200 characters", () => {
    expect(validatePattern(`openai:/${"a".repeat(200)}`)).toBe("a pattern is at most 200 characters");
  });
});

describe("endpointAllowed", () => {
  it("allows everything when the key has no restriction", () => {
    expect(endpointAllowed(undefined, "api:/api/v1/status")).toBe(true);
  });

  it("allows nothing with an empty list", () => {
    expect(endpointAllowed([], "api:/api/v1/status")).toBe(false);
  });

  it("matches a literal pattern exactly: no prefix, no suffix", () => {
    const allow = ["api:/api/v1/status"];
    expect(endpointAllowed(allow, "api:/api/v1/status")).toBe(true);
    expect(endpointAllowed(allow, "api:/api/v1/status/more")).toBe(false);
    expect(endpointAllowed(allow, "api:/api/v1/statu")).toBe(false);
    expect(endpointAllowed(allow, "api:/api/v1/exports")).toBe(false);
  });

  it("treats '*' as any run of characters, in the family or the path", () => {
    expect(endpointAllowed(["openai:*"], "openai:/v1/chat/completions")).toBe(true);
    expect(endpointAllowed(["openai:*"], "groq:/v1/chat/completions")).toBe(false);
    expect(endpointAllowed(["*:/v1/models"], "groq:/v1/models")).toBe(true);
    expect(endpointAllowed(["*:/v1/models"], "api:/api/v1/models")).toBe(false);
    const generate = ["gemini:/v1beta/models/*:generateContent"];
    expect(endpointAllowed(generate, "gemini:/v1beta/models/flash:generateContent")).toBe(true);
    expect(endpointAllowed(generate, "gemini:/v1beta/models/flash:streamGenerateContent")).toBe(false);
  });

  it("takes every other character literally ('.' is not a wildcard)", () => {
    expect(endpointAllowed(["openai:/v1/a.b"], "openai:/v1/a.b")).toBe(true);
    expect(endpointAllowed(["openai:/v1/a.b"], "openai:/v1/aXb")).toBe(false);
  });

  it("allows when any one pattern matches", () => {
    const allow = ["openai:/v1/embeddings", "api:/api/v1/status"];
    expect(endpointAllowed(allow, "api:/api/v1/status")).toBe(true);
    expect(endpointAllowed(allow, "openai:/v1/embeddings")).toBe(true);
    expect(endpointAllowed(allow, "openai:/v1/models")).toBe(false);
  });
});
