import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parquetWriteBuffer } from "hyparquet-writer";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { syntheticRecord } from "../../../../bench/warehouse-records";
import { athenaLiteral } from "../../../../lambda/adapters/athena/export-query";
import { DuckDBWarehouseQuery } from "../../../../lambda/adapters/duckdb/export-query";
import { encodeRecords } from "../../../../lambda/adapters/parquet/codec";
import { buildInteractionQuery } from "../../../../lambda/adapters/sql/export-query";
import {
  CSV_HEADER,
  csvLine,
  type ExportValue,
  frameExport,
  jsonRow,
} from "../../../../lambda/core/export-format";
import type { ExportFormat } from "../../../../lambda/core/export-request";
import {
  type InteractionRecord,
  partitionPrefix,
  RECORD_COLUMNS,
  recordDay,
} from "../../../../lambda/core/record";

const INJECTION = "' OR 1=1 --";

describe("buildInteractionQuery", () => {
  it("puts every value in a parameter, none in the SQL text", () => {
    const built = buildInteractionQuery({
      projectId: "proj-a",
      start: "2026-01-01",
      end: "2026-01-31",
      filters: { model: INJECTION, user_id: "u1", vendor: "openai", status_code: 429, billing_mode: "byok" },
    });
    expect(built.where).toBe(
      '"project" = ? AND "dt" BETWEEN ? AND ? AND "project_id" = ? AND "model" = ? AND "user_id" = ? AND "vendor" = ? AND "status_code" = ? AND "billing_mode" = ?',
    );
    expect(built.params).toEqual([
      { type: "string", value: "proj-a" },
      { type: "string", value: "2026-01-01" },
      { type: "string", value: "2026-01-31" },
      { type: "string", value: "proj-a" },
      { type: "string", value: INJECTION },
      { type: "string", value: "u1" },
      { type: "string", value: "openai" },
      { type: "integer", value: 429 },
      { type: "string", value: "byok" },
    ]);
    expect(`${built.columns} ${built.where}`).not.toContain("proj-a");
    expect(`${built.columns} ${built.where}`).not.toContain("OR 1=1");
  });

  it("scopes to the project and days even without filters", () => {
    const built = buildInteractionQuery({
      projectId: "p1",
      start: "2026-01-01",
      end: "2026-01-01",
      filters: {},
    });
    expect(built.where).toBe('"project" = ? AND "dt" BETWEEN ? AND ? AND "project_id" = ?');
    expect(built.params).toHaveLength(4);
  });

  it("renders Athena execution parameters as literals, quotes doubled", () => {
    expect(athenaLiteral({ type: "string", value: "gpt-4o" })).toBe("'gpt-4o'");
    expect(athenaLiteral({ type: "string", value: INJECTION })).toBe("''' OR 1=1 --'");
    expect(athenaLiteral({ type: "integer", value: 200 })).toBe("200");
  });
});

/** A record as an export shows it: the timestamp as ISO text, everything else as stored. */
function exported(record: InteractionRecord): Record<string, ExportValue> {
  return { ...record, started_at: new Date(record.started_at).toISOString() };
}

describe("DuckDB encodes rows exactly as the JavaScript encoders do", () => {
  let root: string;
  let query: DuckDBWarehouseQuery;
  const records: InteractionRecord[] = [
    syntheticRecord(0),
    {
      ...syntheticRecord(1),
      request_body: 'commas, "quotes"\r\nand\nnewlines',
      response_body: "=1+1",
      user_agent: "+cmd",
      model: "-m",
      user_id: "@u",
      error_type: "\tTab",
      error_code: "\rCR",
      audio_seconds: 2.25,
      images: 3,
      speech_characters: 0,
      price_version: "Ünïcödé 日本語 🚀 \u2028",
      cost_micros: 1_500_000,
    },
    {
      ...syntheticRecord(2),
      audio_seconds: 3,
      request_body: "",
      response_body: null,
      request_id: null,
      cost_micros: null,
    },
    {
      ...syntheticRecord(3),
      started_at: Date.UTC(2026, 0, 15, 23, 59, 59, 999),
      cost_micros: 12_345_678_901,
    },
  ];

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), "dmt-query-"));
    const dir = join(
      root,
      ...partitionPrefix("proj-a", recordDay(records[0] as InteractionRecord)).split("/"),
    );
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "a.parquet"), encodeRecords(records));
    query = await DuckDBWarehouseQuery.open(root);
  });
  afterAll(() => {
    query.close();
    rmSync(root, { recursive: true, force: true });
  });

  async function exportText(format: ExportFormat): Promise<string> {
    let text = "";
    const rows = query.rows(
      { projectId: "proj-a", start: "2026-01-15", end: "2026-01-15", filters: {} },
      format,
    );
    for await (const chunk of frameExport(format, rows)) text += chunk;
    return text;
  }

  it("CSV: byte for byte", async () => {
    expect(await exportText("csv")).toBe(CSV_HEADER + records.map((r) => csvLine(exported(r))).join(""));
  });

  it("JSON: the same objects, keys in column order", async () => {
    const parsed = JSON.parse(await exportText("json")) as Record<string, unknown>[];
    expect(parsed).toEqual(records.map((r) => JSON.parse(jsonRow(exported(r)))));
    expect(Object.keys(parsed[1] ?? {})).toEqual(
      Object.keys(JSON.parse(jsonRow(exported(records[1] as InteractionRecord)))),
    );
  });

  it("reads nothing of another project or outside the days, and injected text matches nothing", async () => {
    const rows = async (filters: object, projectId = "proj-a", start = "2026-01-15") => {
      const out: string[] = [];
      for await (const batch of query.rows({ projectId, start, end: start, filters }, "json"))
        out.push(...batch);
      return out;
    };
    expect(await rows({})).toHaveLength(4);
    expect(await rows({}, "proj-b")).toEqual([]);
    expect(await rows({}, "proj-a", "2026-01-16")).toEqual([]);
    expect(await rows({ model: INJECTION })).toEqual([]);
    expect(await rows({ user_id: "@u" })).toHaveLength(1);
  });

  it("reads files written before a column existed, with nulls there", async () => {
    // A file of an older schema: no error_code column at all.
    const old = { ...syntheticRecord(9, { projectId: "proj-old" }), error_code: "never-written" };
    const columns = RECORD_COLUMNS.filter((c) => c.name !== "error_code" && c.kind === "string");
    const dir = join(root, ...partitionPrefix("proj-old", "2026-01-15").split("/"));
    mkdirSync(dir, { recursive: true });
    const file = parquetWriteBuffer({
      columnData: [
        ...columns.map((c) => ({
          name: c.name,
          data: [old[c.name as keyof typeof old]],
          type: "STRING" as const,
        })),
        { name: "started_at", data: [new Date(old.started_at)], type: "TIMESTAMP" },
      ],
    });
    writeFileSync(join(dir, "old.parquet"), new Uint8Array(file));
    const rows: string[] = [];
    const request = { projectId: "proj-old", start: "2026-01-15", end: "2026-01-15", filters: {} };
    for await (const batch of query.rows(request, "json")) rows.push(...batch);
    expect(rows).toHaveLength(1);
    expect(JSON.parse(rows[0] as string)).toMatchObject({
      transaction_id: old.transaction_id,
      error_code: null,
      status_code: null,
      started_at: new Date(old.started_at).toISOString(),
    });
  });

  it("refuses a project id that is not one", async () => {
    const rows = query.rows(
      { projectId: "../proj-a", start: "2026-01-15", end: "2026-01-15", filters: {} },
      "json",
    );
    await expect(rows[Symbol.asyncIterator]().next()).rejects.toThrow("invalid project id");
  });
});
