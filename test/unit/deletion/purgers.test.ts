import { describe, expect, it } from "vitest";
import { syntheticRecord } from "../../../bench/warehouse-records";
import { MemoryObjectStore } from "../../../lambda/adapters/memory/object-store";
import { csvLine, jsonRow } from "../../../lambda/core/export-format";
import { parseCsv, QueryResultsPurger, tableRows } from "../../../lambda/deletion/purgers";

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

describe("the results bucket's purger", () => {
  it("removes Athena's results and the dashboard's CSV and JSON downloads that hold the user, and keeps the rest", async () => {
    const store = new MemoryObjectStore();
    const row = (user: string, projectId = "acme") => ({
      ...syntheticRecord(1, { projectId }),
      user_id: user,
      started_at: new Date(0).toISOString(),
    });
    const csv = (rows: Record<string, unknown>[]) =>
      new TextEncoder().encode(
        `${Object.keys(rows[0] ?? {}).join(",")}\r\n${rows.map((r) => csvLine(r as never)).join("")}`,
      );
    const json = (rows: Record<string, unknown>[]) =>
      new TextEncoder().encode(`[\n${rows.map((r) => jsonRow(r as never)).join(",\n")}\n]\n`);
    await store.put("q-1.csv", csv([row("ada")]));
    await store.put("q-1.csv.metadata", new Uint8Array([1]));
    await store.put("dashboard-downloads/acme/u1/dmt-export-acme.csv", csv([row("bob"), row("ada")]));
    await store.put("dashboard-downloads/acme/u2/dmt-export-acme.json", json([row("ada")]));
    await store.put("dashboard-downloads/acme/u3/dmt-export-acme.json", json([row("bob")]));
    await store.put("dashboard-downloads/other/u4/dmt-export-other.json", json([row("ada", "other")]));

    expect(await new QueryResultsPurger(store).purgeUser("acme", "ada")).toBe(3);
    const left: string[] = [];
    for await (const object of store.list("")) left.push(object.key);
    expect(left.sort()).toEqual([
      "dashboard-downloads/acme/u3/dmt-export-acme.json",
      "dashboard-downloads/other/u4/dmt-export-other.json",
    ]);
  });
});
