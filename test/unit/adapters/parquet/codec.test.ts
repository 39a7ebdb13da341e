import { describe, expect, it } from "vitest";
import { syntheticRecord } from "../../../../bench/warehouse-records";
import { decodeRecords, encodeRecords } from "../../../../lambda/adapters/parquet/codec";
import { type InteractionRecord, RECORD_COLUMNS } from "../../../../lambda/core/record";

describe("reading warehouse files back", () => {
  it("gives the records the writer took, so re-encoding a subset keeps every value", async () => {
    const records: InteractionRecord[] = [
      syntheticRecord(1),
      { ...syntheticRecord(2), user_id: null, ttft_ms: null, cost_micros: null, request_body: null },
      { ...syntheticRecord(3), response_body: "Ünïcödé — 日本語 — 🚀\u0000end", cost_micros: 2 ** 40 },
    ];
    const decoded = await decodeRecords(encodeRecords(records));
    expect(decoded).toEqual(records);
    expect(Object.keys(decoded[0] ?? {})).toEqual(RECORD_COLUMNS.map((c) => c.name));
    expect(await decodeRecords(encodeRecords(decoded.slice(1)))).toEqual(records.slice(1));
  });
});
