import { describe, expect, it } from "vitest";
import { syntheticRecord } from "../../../bench/warehouse-records";
import { csvLine, jsonRow } from "../../../lambda/core/export-format";
import { parseCsv, tableRows } from "../../../lambda/deletion/purgers";

describe("copies in files", () => {
  it("reads the rows of CSV and JSON exports, whatever the cells hold", () => {
    const rows = [
      { ...syntheticRecord(1), user_id: 'a "quoted", user\r\nwith lines' },
      { ...syntheticRecord(2), user_id: "=HYPERLINK()" },
    ].map((r) => ({ ...r, started_at: new Date(r.started_at).toISOString() }));
    const csv = `${Object.keys(rows[0] ?? {}).join(",")}\r\n${rows.map((r) => csvLine(r)).join("")}`;
    const parsed = tableRows(new TextEncoder().encode(csv), "csv");
    expect(parsed.map((r) => r.user_id)).toEqual(['a "quoted", user\r\nwith lines', "'=HYPERLINK()"]);
    const json = `[\n${rows.map((r) => jsonRow(r)).join(",\n")}\n]\n`;
    expect(tableRows(new TextEncoder().encode(json), "json").map((r) => r.user_id)).toEqual([
      'a "quoted", user\r\nwith lines',
      "=HYPERLINK()",
    ]);
    expect(parseCsv('"a","b""c"\n1,\n')).toEqual([
      ["a", 'b"c'],
      ["1", ""],
    ]);
  });
});
