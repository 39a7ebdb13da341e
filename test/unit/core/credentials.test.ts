import { describe, expect, it } from "vitest";
import { type PresentedCredentials, presentedCredentials } from "../../../lambda/core/credentials";
import { ApiError } from "../../../lambda/core/errors";

interface Presented {
  headers?: Record<string, string>;
  query?: Record<string, string>;
  gemini?: boolean;
}

function present({ headers = {}, query = {}, gemini = false }: Presented): PresentedCredentials {
  const lower = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));
  return presentedCredentials({
    header: (name) => lower[name],
    query: (name) => query[name],
    geminiFamily: gemini,
  });
}

function refusal(input: Presented): ReturnType<ApiError["toBody"]> & { status: number } {
  try {
    present(input);
  } catch (err) {
    if (err instanceof ApiError) return { status: err.status, ...err.toBody() };
    throw err;
  }
  throw new Error("expected the credentials to be refused");
}

const MISSING = {
  status: 401,
  error: {
    message: "No API key provided. Send 'Authorization: Bearer <API_KEY>'.",
    type: "authentication_error",
    code: "missing_api_key",
  },
};
const invalid = (message: string) => ({
  status: 401,
  error: { message, type: "authentication_error", code: "invalid_api_key" },
});
const BAD_SCHEME = invalid("The Authorization header must be 'Bearer <API_KEY>'.");
const BAD_DUAL = invalid(
  "A dual key must be '<API_KEY>;<VENDOR_KEY>': two non-empty parts of visible ASCII, joined by exactly one ';'.",
);

describe("presentedCredentials: each presentation", () => {
  it.each<[string, Presented, PresentedCredentials["via"]]>([
    ["Authorization: Bearer", { headers: { Authorization: "Bearer K" } }, "bearer"],
    ["a case-insensitive scheme word", { headers: { Authorization: "bEaReR K" } }, "bearer"],
    ["X-API-Key", { headers: { "X-API-Key": "K" } }, "x-api-key"],
    ["?api_key", { query: { api_key: "K" } }, "query:api_key"],
    [
      "x-goog-api-key on the Gemini family",
      { headers: { "x-goog-api-key": "K" }, gemini: true },
      "x-goog-api-key",
    ],
    ["?key on the Gemini family", { query: { key: "K" }, gemini: true }, "query:key"],
  ])("reads %s", (_case, input, via) => {
    expect(present(input)).toEqual({ serviceKey: "K", via });
  });

  it("ignores the Gemini-only presentations elsewhere", () => {
    expect(refusal({ headers: { "x-goog-api-key": "K" } })).toEqual(MISSING);
    expect(refusal({ query: { key: "K" } })).toEqual(MISSING);
  });

  it("refuses a request with no key at all", () => {
    expect(refusal({})).toEqual(MISSING);
    expect(refusal({ gemini: true })).toEqual(MISSING);
  });
});

describe("presentedCredentials: precedence (the first present wins, even if it differs)", () => {
  it("Bearer beats X-API-Key and the query", () => {
    const headers = { Authorization: "Bearer B", "X-API-Key": "X" };
    expect(present({ headers, query: { api_key: "Q" } }).serviceKey).toBe("B");
  });

  it("X-API-Key beats x-goog-api-key and the query parameters", () => {
    const headers = { "X-API-Key": "X", "x-goog-api-key": "G" };
    expect(present({ headers, query: { api_key: "Q", key: "K" }, gemini: true }).serviceKey).toBe("X");
  });

  it("x-goog-api-key beats ?api_key on the Gemini family, and ?api_key beats ?key", () => {
    const query = { api_key: "Q", key: "K" };
    expect(present({ headers: { "x-goog-api-key": "G" }, query, gemini: true }).serviceKey).toBe("G");
    expect(present({ query, gemini: true }).serviceKey).toBe("Q");
  });

  it("a malformed Authorization header is refused, not skipped for a later presentation", () => {
    expect(refusal({ headers: { Authorization: "Basic abc", "X-API-Key": "X" } })).toEqual(BAD_SCHEME);
  });
});

describe("presentedCredentials: the Authorization header", () => {
  it.each([
    ["another scheme", "Basic ZG10Og=="],
    ["the scheme word alone", "Bearer"],
    ["a tab after the scheme", "Bearer\tK"],
    ["no space after the scheme", "BearerK"],
    ["a Token scheme", "Token K"],
  ])("refuses %s", (_case, authorization) => {
    expect(refusal({ headers: { Authorization: authorization } })).toEqual(BAD_SCHEME);
  });

  it("refuses an empty header or an empty token as a missing key", () => {
    expect(refusal({ headers: { Authorization: "" } })).toEqual(MISSING);
    expect(refusal({ headers: { Authorization: "Bearer " } })).toEqual(MISSING);
  });

  it("never trims: a second space becomes part of the key", () => {
    expect(present({ headers: { Authorization: "Bearer  K" } }).serviceKey).toBe(" K");
    expect(present({ headers: { Authorization: "Bearer K " } }).serviceKey).toBe("K ");
  });

  it("refuses two Authorization headers (the host joins them with ', ')", () => {
    expect(refusal({ headers: { Authorization: "Bearer A, Bearer B" } })).toEqual(
      invalid("Send exactly one Authorization header."),
    );
  });
});

describe("presentedCredentials: dual keys", () => {
  it.each<[string, Presented]>([
    ["Bearer", { headers: { Authorization: "Bearer K;sk-vendor" } }],
    ["X-API-Key", { headers: { "X-API-Key": "K;sk-vendor" } }],
    ["?api_key", { query: { api_key: "K;sk-vendor" } }],
    ["x-goog-api-key", { headers: { "x-goog-api-key": "K;sk-vendor" }, gemini: true }],
    ["?key", { query: { key: "K;sk-vendor" }, gemini: true }],
  ])("splits '<dmt key>;<vendor key>' presented by %s", (_case, input) => {
    const credentials = present(input);
    expect(credentials.serviceKey).toBe("K");
    expect(credentials.vendorKey).toBe("sk-vendor");
  });

  it.each([
    ["an empty vendor half", "K;"],
    ["an empty service half", ";sk-vendor"],
    ["both halves empty", ";"],
    ["a second ';' (the vendor half would be 'a;b')", "K;a;b"],
    ["a doubled ';' (the vendor half would be ';v')", "K;;v"],
    ["a trailing ';' after both halves", "K;v;"],
    ["only semicolons", ";;"],
    ["a space at the vendor half's start", "K; sk-vendor"],
    ["a control character in the vendor half", "K;sk\u0001vendor"],
  ])("refuses %s", (_case, value) => {
    expect(refusal({ headers: { Authorization: `Bearer ${value}` } })).toEqual(BAD_DUAL);
    expect(refusal({ query: { api_key: value } })).toEqual(BAD_DUAL);
  });
});
