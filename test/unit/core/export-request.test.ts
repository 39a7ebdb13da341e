import { describe, expect, it } from "vitest";
import { ApiError } from "../../../lambda/core/errors";
import { EXPORT_MAX_SPAN_DAYS, parseExportRequest } from "../../../lambda/core/export-request";

const base = { format: "json", range: { start: "2026-01-01", end: "2026-01-31" } };

function refusal(body: Record<string, unknown>): ApiError {
  try {
    parseExportRequest(body);
  } catch (err) {
    if (err instanceof ApiError) return err;
    throw err;
  }
  throw new Error("expected a 400");
}

describe("parseExportRequest", () => {
  it("accepts a full request", () => {
    expect(
      parseExportRequest({
        format: "csv",
        range: { start: "2024-02-29", end: "2024-03-01" },
        filters: {
          model: "models/gemini-2.5-flash",
          user_id: "a.b+c@d.io",
          vendor: "gemini",
          status_code: 429,
          billing_mode: "byok",
        },
      }),
    ).toEqual({
      format: "csv",
      schema: "interactions",
      range: { start: "2024-02-29", end: "2024-03-01" },
      filters: {
        model: "models/gemini-2.5-flash",
        user_id: "a.b+c@d.io",
        vendor: "gemini",
        status_code: 429,
        billing_mode: "byok",
      },
    });
  });

  it("reads the schema: interaction rows by default, or FOCUS", () => {
    expect(parseExportRequest(base).schema).toBe("interactions");
    expect(parseExportRequest({ ...base, schema: "focus" }).schema).toBe("focus");
    expect(refusal({ ...base, schema: "focus-1.3" }).message).toBe(
      "Invalid field 'schema': must be one of interactions, focus.",
    );
    expect(refusal({ ...base, schema: 2 }).message).toBe("Invalid field 'schema': must be a string.");
  });

  it("accepts a one-day range and the maximum span exactly", () => {
    expect(
      parseExportRequest({ format: "json", range: { start: "2026-03-04", end: "2026-03-04" } }).filters,
    ).toEqual({});
    // 2024 is a leap year: 2024-01-01 .. 2024-12-31 is 366 days.
    expect(EXPORT_MAX_SPAN_DAYS).toBe(366);
    expect(() =>
      parseExportRequest({ format: "json", range: { start: "2024-01-01", end: "2024-12-31" } }),
    ).not.toThrow();
  });

  it.each<[string, Record<string, unknown>, string, string]>([
    ["missing format", { range: base.range }, "missing_field", "Missing required field 'format'."],
    [
      "unknown format",
      { ...base, format: "xml" },
      "invalid_field",
      "Invalid field 'format': must be one of json, csv.",
    ],
    [
      "format not a string",
      { ...base, format: 1 },
      "invalid_field",
      "Invalid field 'format': must be a string.",
    ],
    ["missing range", { format: "json" }, "missing_field", "Missing required field 'range'."],
    [
      "range not an object",
      { ...base, range: "2026-01" },
      "invalid_field",
      "Invalid field 'range': must be an object {start, end}.",
    ],
    [
      "missing start",
      { ...base, range: { end: "2026-01-01" } },
      "missing_field",
      "Missing required field 'range.start'.",
    ],
    [
      "missing end",
      { ...base, range: { start: "2026-01-01" } },
      "missing_field",
      "Missing required field 'range.end'.",
    ],
    [
      "a date in another format",
      { ...base, range: { start: "01/02/2026", end: "2026-01-03" } },
      "invalid_field",
      "Invalid field 'range.start': must be a date string YYYY-MM-DD.",
    ],
    [
      "a date with a time",
      { ...base, range: { start: "2026-01-01T00:00:00Z", end: "2026-01-03" } },
      "invalid_field",
      "Invalid field 'range.start': must be a date string YYYY-MM-DD.",
    ],
    [
      "2026-02-30",
      { ...base, range: { start: "2026-02-01", end: "2026-02-30" } },
      "invalid_field",
      "Invalid field 'range.end': 2026-02-30 is not a calendar date.",
    ],
    [
      "2025-02-29 (not a leap year)",
      { ...base, range: { start: "2025-02-29", end: "2025-03-01" } },
      "invalid_field",
      "Invalid field 'range.start': 2025-02-29 is not a calendar date.",
    ],
    [
      "month 13",
      { ...base, range: { start: "2026-13-01", end: "2026-13-02" } },
      "invalid_field",
      "Invalid field 'range.start': 2026-13-01 is not a calendar date.",
    ],
    [
      "start after end",
      { ...base, range: { start: "2026-02-02", end: "2026-02-01" } },
      "invalid_field",
      "Invalid field 'range': start 2026-02-02 is after end 2026-02-01.",
    ],
    [
      "a span over the maximum",
      { ...base, range: { start: "2025-01-01", end: "2026-01-02" } },
      "invalid_field",
      "Invalid field 'range': covers 367 days; an export covers at most 366 days.",
    ],
    [
      "unknown range keys",
      { ...base, range: { ...base.range, tz: "UTC" } },
      "invalid_field",
      "Invalid field 'range': unknown key 'tz'; allowed: start, end.",
    ],
    [
      "unknown top-level fields",
      { ...base, limit: 10 },
      "invalid_field",
      "Invalid field 'body': unknown key 'limit'; allowed: format, schema, range, filters.",
    ],
    [
      "filters not an object",
      { ...base, filters: ["model"] },
      "invalid_field",
      "Invalid field 'filters': must be an object.",
    ],
    [
      "unknown filter keys, named",
      { ...base, filters: { model: "m", project_id: "other", cost: 1 } },
      "invalid_field",
      "Invalid field 'filters': unknown keys 'project_id', 'cost'; allowed: model, user_id, vendor, status_code, billing_mode.",
    ],
    [
      "SQL in a model filter",
      { ...base, filters: { model: "' OR 1=1 --" } },
      "invalid_field",
      "Invalid field 'filters.model': must be a model name",
    ],
    [
      "SQL in a user filter",
      { ...base, filters: { user_id: "u1' OR '1'='1" } },
      "invalid_field",
      "Invalid field 'filters.user_id': must be a user id",
    ],
    [
      "an empty user id",
      { ...base, filters: { user_id: "" } },
      "invalid_field",
      "Invalid field 'filters.user_id': must be a user id",
    ],
    [
      "a model filter that is a number",
      { ...base, filters: { model: 4 } },
      "invalid_field",
      "Invalid field 'filters.model': must be a string.",
    ],
    [
      "a status code as a string",
      { ...base, filters: { status_code: "200" } },
      "invalid_field",
      "Invalid field 'filters.status_code': must be an integer from 100 to 599.",
    ],
    [
      "a fractional status code",
      { ...base, filters: { status_code: 200.5 } },
      "invalid_field",
      "Invalid field 'filters.status_code': must be an integer from 100 to 599.",
    ],
    [
      "a status code out of range",
      { ...base, filters: { status_code: 99 } },
      "invalid_field",
      "Invalid field 'filters.status_code': must be an integer from 100 to 599.",
    ],
    [
      "an unknown vendor",
      { ...base, filters: { vendor: "acme" } },
      "invalid_field",
      "Invalid field 'filters.vendor': must be one of groq, openai, anthropic, gemini.",
    ],
    [
      "a billing mode as a list",
      { ...base, filters: { billing_mode: ["byok"] } },
      "invalid_field",
      "Invalid field 'filters.billing_mode': must be a string.",
    ],
  ])("refuses %s with a 400 that says what is wrong", (_, body, code, message) => {
    const err = refusal(body);
    expect(err.status).toBe(400);
    expect(err.type).toBe("invalid_request_error");
    expect(err.code).toBe(code);
    expect(err.message.startsWith(message)).toBe(true);
  });
});
