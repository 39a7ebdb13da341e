import { describe, expect, it } from "vitest";
import { syntheticRecord } from "../../../bench/warehouse-records";
import {
  CSV_HEADER,
  csvCell,
  csvLine,
  EXPORT_COLUMNS,
  frameExport,
  jsonRow,
} from "../../../lambda/core/export-format";
import type { ExportFormat } from "../../../lambda/core/export-request";

async function frame(format: ExportFormat, batches: string[][]): Promise<string> {
  async function* source() {
    yield* batches;
  }
  let out = "";
  for await (const chunk of frameExport(format, source())) out += chunk;
  return out;
}

/** A strict RFC 4180 reader, to check that what we write reads back as the same cells. */
function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let cell = "";
  let i = 0;
  while (i < text.length) {
    if (text[i] === '"') {
      i++;
      for (;;) {
        const quote = text.indexOf('"', i);
        if (quote === -1) throw new Error("unterminated quoted cell");
        cell += text.slice(i, quote);
        i = quote + 1;
        if (text[i] !== '"') break;
        cell += '"';
        i++;
      }
    }
    const c = text[i];
    if (c === ",") {
      row.push(cell);
      cell = "";
      i++;
    } else if (c === "\r" && text[i + 1] === "\n") {
      row.push(cell);
      rows.push(row);
      row = [];
      cell = "";
      i += 2;
    } else if (c === undefined) {
      break;
    } else {
      if (c === '"' || c === "\n" || c === "\r") throw new Error(`bare ${JSON.stringify(c)} at ${i}`);
      cell += c;
      i++;
    }
  }
  if (cell !== "" || row.length > 0) throw new Error("last line without CRLF");
  return rows;
}

describe("csvCell", () => {
  it.each([
    ["plain", "plain"],
    ["a,b", '"a,b"'],
    ['say "hi"', '"say ""hi"""'],
    ["line\nbreak", '"line\nbreak"'],
    ["cr\rlf", '"cr\rlf"'],
    ["Ünïcödé 日本語 🚀", "Ünïcödé 日本語 🚀"],
    ["", ""],
  ])("writes %j as %j", (value, cell) => {
    expect(csvCell(value, true)).toBe(cell);
  });

  it.each([
    ["=SUM(A1:A9)", "'=SUM(A1:A9)"],
    ["+1", "'+1"],
    ["-2", "'-2"],
    ["@cmd", "'@cmd"],
    ["\tx", "'\tx"],
    ["\rx", '"\'\rx"'],
    ['=HYPERLINK("http://x","y")', '"\'=HYPERLINK(""http://x"",""y"")"'],
  ])("neutralises text that a spreadsheet would run: %j", (value, cell) => {
    expect(csvCell(value, true)).toBe(cell);
  });

  it("leaves numbers, booleans and nulls as they are", () => {
    expect(csvCell(-5, false)).toBe("-5");
    expect(csvCell(1.5, false)).toBe("1.5");
    expect(csvCell(true, false)).toBe("true");
    expect(csvCell(null, true)).toBe("");
    // A timestamp is not a text column: never neutralised.
    expect(csvCell("2026-01-02T03:04:05.678Z", false)).toBe("2026-01-02T03:04:05.678Z");
  });
});

describe("csvLine and jsonRow", () => {
  it("write every column in order, and read back as the same values", () => {
    const record = {
      ...syntheticRecord(4),
      user_agent: '=cmd|" /C calc"!A0',
      request_body: 'a,"b"\r\nc ü',
    } as Record<string, string | number | boolean | null>;
    const [cells] = parseCsv(csvLine(record));
    expect(cells).toHaveLength(EXPORT_COLUMNS.length);
    const at = (name: string) => cells?.[EXPORT_COLUMNS.indexOf(name)];
    expect(at("request_body")).toBe('a,"b"\r\nc ü');
    expect(at("user_agent")).toBe('\'=cmd|" /C calc"!A0');
    expect(at("images")).toBe("");
    expect(at("cost_micros")).toBe(String(record.cost_micros));
    expect(Object.keys(JSON.parse(jsonRow(record)))).toEqual(EXPORT_COLUMNS);
  });

  it("write cost_usd beside cost_micros: the same amount in dollars, to the micro-dollar", () => {
    const base = syntheticRecord(4) as Record<string, string | number | boolean | null>;
    const costUsd = (micros: number | null) => {
      const record = { ...base, cost_micros: micros };
      const cells = parseCsv(csvLine(record))[0] ?? [];
      const json = JSON.parse(jsonRow(record)) as Record<string, unknown>;
      expect(cells[EXPORT_COLUMNS.indexOf("cost_usd")]).toBe(json.cost_usd ?? "");
      return json.cost_usd;
    };
    expect(EXPORT_COLUMNS.indexOf("cost_usd")).toBe(EXPORT_COLUMNS.indexOf("cost_micros") + 1);
    expect(costUsd(125)).toBe("0.000125");
    expect(costUsd(1_500_000)).toBe("1.50");
    expect(costUsd(12_345_678_901)).toBe("12345.678901");
    expect(costUsd(0)).toBe("0.00");
    expect(costUsd(null)).toBeNull();
  });
});

describe("frameExport", () => {
  it("makes an empty export an empty array, or the header alone", async () => {
    expect(JSON.parse(await frame("json", []))).toEqual([]);
    expect(await frame("json", [[], []])).toBe("[]\n");
    expect(await frame("csv", [])).toBe(CSV_HEADER);
    expect(parseCsv(CSV_HEADER)).toEqual([EXPORT_COLUMNS]);
  });

  it("joins batches into one valid JSON array", async () => {
    const text = await frame("json", [['{"a":1}', '{"a":2}'], [], ['{"a":3}']]);
    expect(JSON.parse(text)).toEqual([{ a: 1 }, { a: 2 }, { a: 3 }]);
  });

  it("writes the CSV header once, before the first rows", async () => {
    const text = await frame("csv", [["1\r\n", "2\r\n"], ["3\r\n"]]);
    expect(text).toBe(`${CSV_HEADER}1\r\n2\r\n3\r\n`);
  });
});
