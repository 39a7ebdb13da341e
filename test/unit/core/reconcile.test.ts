import { describe, expect, it } from "vitest";
import {
  compareUsage,
  parseDayRange,
  parseUsageReportPage,
  ReconcileInputError,
  usageReportUrl,
} from "../../../lambda/core/reconcile";

describe("vendor usage report pages", () => {
  it("reads OpenAI's completions usage page: day buckets by model, input with cached, the cursor", () => {
    const page = {
      object: "page",
      data: [
        {
          object: "bucket",
          start_time: 1730419200,
          end_time: 1730505600,
          results: [
            {
              object: "organization.usage.completions.result",
              input_tokens: 1000,
              output_tokens: 500,
              input_cached_tokens: 800,
              num_model_requests: 5,
              model: "gpt-4o-mini",
            },
          ],
        },
      ],
      has_more: true,
      next_page: "AAAAAGdGxdEiJdKOAAAAAGcqsYA=",
    };
    expect(parseUsageReportPage("openai", page)).toEqual({
      rows: [{ day: "2024-11-01", model: "gpt-4o-mini", input: 1000, output: 500, cached: 800 }],
      nextPage: "AAAAAGdGxdEiJdKOAAAAAGcqsYA=",
    });
  });

  it("reads Anthropic's messages usage report: input is uncached + cache reads + both cache writes", () => {
    const page = {
      data: [
        {
          starting_at: "2026-03-01T00:00:00Z",
          ending_at: "2026-03-02T00:00:00Z",
          results: [
            {
              uncached_input_tokens: 10,
              cache_read_input_tokens: 200,
              cache_creation: { ephemeral_5m_input_tokens: 30, ephemeral_1h_input_tokens: 4 },
              output_tokens: 55,
              model: "claude-sonnet-4-6",
            },
          ],
        },
      ],
      has_more: false,
      next_page: null,
    };
    expect(parseUsageReportPage("anthropic", page)).toEqual({
      rows: [{ day: "2026-03-01", model: "claude-sonnet-4-6", input: 244, output: 55, cached: 200 }],
    });
  });

  it("refuses an answer that is not a report", () => {
    expect(() => parseUsageReportPage("openai", { error: { message: "nope" } })).toThrow(/no data array/);
  });

  it("asks for day buckets by model over the whole last day", () => {
    const url = new URL(
      usageReportUrl("anthropic", "https://api.anthropic.com/", { from: "2026-03-01", to: "2026-03-31" }),
    );
    expect(url.pathname).toBe("/v1/organizations/usage_report/messages");
    expect(url.searchParams.get("ending_at")).toBe("2026-04-01T00:00:00Z");
    expect(url.searchParams.getAll("group_by[]")).toEqual(["model"]);
    const openai = new URL(
      usageReportUrl("openai", "https://api.openai.com", { from: "2026-03-01", to: "2026-03-01" }, "c1"),
    );
    expect(openai.searchParams.get("end_time")).toBe(String(Date.parse("2026-03-02T00:00:00Z") / 1000));
    expect(openai.searchParams.get("page")).toBe("c1");
  });
});

describe("compareUsage", () => {
  it("sums each side per day and model and reports theirs less ours, including one-sided rows", () => {
    const ours = [
      { day: "2026-03-01", model: "a", input: 10, output: 5, cached: 0 },
      { day: "2026-03-01", model: "a", input: 20, output: 5, cached: 8 },
    ];
    const theirs = [
      { day: "2026-03-01", model: "a", input: 30, output: 10, cached: 8 },
      { day: "2026-02-28", model: "b", input: 3, output: 1, cached: 0 },
    ];
    expect(compareUsage(ours, theirs)).toEqual([
      {
        day: "2026-02-28",
        model: "b",
        ours: { input: 0, output: 0, cached: 0 },
        theirs: { input: 3, output: 1, cached: 0 },
        difference: { input: 3, output: 1, cached: 0 },
      },
      {
        day: "2026-03-01",
        model: "a",
        ours: { input: 30, output: 10, cached: 8 },
        theirs: { input: 30, output: 10, cached: 8 },
        difference: { input: 0, output: 0, cached: 0 },
      },
    ]);
  });
});

describe("parseDayRange", () => {
  it.each([
    ["2026-02-30", "2026-03-01", "--from must be a day like 2026-01-31, not '2026-02-30'"],
    ["2026-03-01", "2026-3-2", "--to must be a day like 2026-01-31, not '2026-3-2'"],
    ["2026-03-02", "2026-03-01", "--from 2026-03-02 is after --to 2026-03-01"],
    ["2025-01-01", "2026-03-01", "reconcile at most 366 days at a time"],
  ])("refuses %s to %s", (from, to, message) => {
    expect(() => parseDayRange(from, to)).toThrow(new ReconcileInputError(message));
  });

  it("takes one day, and a leap day", () => {
    expect(parseDayRange("2028-02-29", "2028-02-29")).toEqual({ from: "2028-02-29", to: "2028-02-29" });
  });
});
