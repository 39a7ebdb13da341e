import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { deletionRequestSchema, explainDeletionRequest } from "../../../lambda/core/deletion";
import { explainExportRequest, exportRequestSchema } from "../../../lambda/core/export-request";

/**
 * The zod schemas decide what `POST /api/v1/exports` and `POST /api/v1/data` accept, and the API
 * description is generated from them; the hand-written checks word the refusals. Over bodies near the
 * edges (good values, wrong types, unknown keys, impossible days, long ranges), both must agree, so a
 * refusal always carries its own words and the description says exactly what is accepted.
 */
const accepts = (check: () => unknown) => {
  try {
    check();
    return true;
  } catch {
    return false;
  }
};

const odd = fc.oneof(
  fc.constant(undefined),
  fc.constant(null),
  fc.integer(),
  fc.string(),
  fc.boolean(),
  fc.constant([]),
);
const optional = <T>(arb: fc.Arbitrary<T>) => fc.oneof(arb, odd);
const dayText = fc.oneof(
  fc
    .date({ min: new Date("2020-01-01"), max: new Date("2030-12-31"), noInvalidDate: true })
    .map((d) => d.toISOString().slice(0, 10)),
  fc.constantFrom(
    "2026-02-30",
    "2026-13-01",
    "2025-02-29",
    "2024-02-29",
    "0026-01-01",
    "2026-1-01",
    "2026-01-01T00:00Z",
  ),
);

const exportBody = fc.record(
  {
    format: optional(fc.constantFrom("json", "csv", "xml", "JSON")),
    schema: optional(fc.constantFrom("interactions", "focus", "FOCUS", "")),
    range: optional(fc.record({ start: optional(dayText), end: optional(dayText) }, { requiredKeys: [] })),
    filters: optional(
      fc.record(
        {
          model: optional(fc.constantFrom("gpt-4o", "models/gemini-2.5-flash", " bad", "a".repeat(201))),
          user_id: optional(fc.constantFrom("u-1", "a b", "x".repeat(257), "")),
          vendor: optional(fc.constantFrom("openai", "gemini", "azure")),
          status_code: optional(fc.constantFrom(100, 429, 599, 600, 99, 200.5)),
          billing_mode: optional(fc.constantFrom("managed", "byok", "dual", "free")),
          limit: fc.constant(1),
        },
        { requiredKeys: [] },
      ),
    ),
    limit: fc.constant(10),
  },
  { requiredKeys: [] },
);

const deletionBody = fc.record(
  {
    reason: optional(fc.constantFrom("asked", "  ", "", "r".repeat(1000), "r".repeat(1001))),
    user_id: optional(fc.constantFrom("u-1", "", "x".repeat(256), "x".repeat(257))),
    transaction_ids: optional(
      fc.oneof(
        fc.array(fc.constantFrom("txn_1", "a:b.c-d", "bad id", "", 7 as unknown as string), { maxLength: 4 }),
        fc.constant(Array.from({ length: 1001 }, (_, i) => `t${i}`)),
      ),
    ),
    userid: fc.constant("u-1"),
  },
  { requiredKeys: [] },
);

/** Keys whose value is undefined are left out, as JSON would. */
const asJson = (body: Record<string, unknown>) => JSON.parse(JSON.stringify(body)) as Record<string, unknown>;

describe("request schemas and their hand-written wording", () => {
  it("agree on every export body", () => {
    fc.assert(
      fc.property(exportBody, (raw) => {
        const body = asJson(raw);
        expect(exportRequestSchema.safeParse(body).success).toBe(accepts(() => explainExportRequest(body)));
      }),
      { numRuns: 3000 },
    );
  });

  it("agree on every deletion body", () => {
    fc.assert(
      fc.property(deletionBody, (raw) => {
        const body = asJson(raw);
        expect(deletionRequestSchema.safeParse(body).success).toBe(
          accepts(() => explainDeletionRequest(body)),
        );
      }),
      { numRuns: 3000 },
    );
  });
});
