/**
 * POST /api/v1/exports over HTTP. The data API does not mount the exports routes yet, so this builds
 * the same shell around them with a stand-in authentication that sets the caller's project.
 */

import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { serve } from "@hono/node-server";
import type { MiddlewareHandler } from "hono";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { syntheticRecord } from "../../bench/warehouse-records";
import { parquetCodec } from "../../lambda/adapters/parquet/codec";
import { exportRoutes } from "../../lambda/app/data-api/exports";
import type { AppEnv } from "../../lambda/app/env";
import { mountRoutes } from "../../lambda/app/routing";
import { appShell } from "../../lambda/app/shell";
import { EXPORT_COLUMNS } from "../../lambda/core/export-format";
import { silentLogger } from "../../lambda/core/logger";
import { TIER_LIMITS } from "../../lambda/core/model";
import { decimalUsd } from "../../lambda/core/money";
import type { QueueBatch } from "../../lambda/core/queue";
import type { InteractionRecord } from "../../lambda/core/record";
import { type LocalWarehouse, startLocalWarehouse } from "../../lambda/local/warehouse";
import { createWarehouseConsumer } from "../../lambda/warehouse/consumer";

let dir: string;
let warehouse: LocalWarehouse;
let base: string;
let close: () => Promise<void>;

const day = (d: number, h = 12, m = 0, s = 0, ms = 0) => Date.UTC(2026, 0, d, h, m, s, ms);

/** proj-a: 40 varied records on Jan 14-15, plus records on the edges of that range. proj-b: 10 of its own. */
const projA: InteractionRecord[] = [
  ...Array.from({ length: 40 }, (_, i) =>
    syntheticRecord(i, { projectId: "proj-a", startMs: day(14, 0, 30), stepMs: 3_600_000 }),
  ),
  { ...syntheticRecord(100, { projectId: "proj-a" }), started_at: day(14, 0, 0, 0, 0) },
  { ...syntheticRecord(101, { projectId: "proj-a" }), started_at: day(15, 23, 59, 59, 999) },
];
const outside: InteractionRecord[] = [
  { ...syntheticRecord(102, { projectId: "proj-a" }), started_at: day(13, 23, 59, 59, 999) },
  { ...syntheticRecord(103, { projectId: "proj-a" }), started_at: day(16, 0, 0, 0, 0) },
];
const projB = Array.from({ length: 10 }, (_, i) =>
  syntheticRecord(i, { projectId: "proj-b", startMs: day(14), overrides: { userIdHeader: "only-in-b" } }),
);

const fakeAuth: MiddlewareHandler<AppEnv> = async (c, next) => {
  const projectId = c.req.header("x-test-project") ?? "proj-a";
  c.set("auth", {
    projectId,
    keyId: "testkey000000000",
    tier: "free",
    rateLimit: TIER_LIMITS.free,
    store: "full",
  });
  await next();
};

async function land(records: InteractionRecord[]) {
  const handler = createWarehouseConsumer({
    objects: warehouse.objects,
    codec: parquetCodec,
    ledger: {
      lookup: async () => new Map(),
      claim: async (_file, requests) => new Set(requests.map((r) => r.id)),
      commit: async () => {},
      abandon: async () => {},
    },
    deadLetters: { put: async () => {} },
    logger: silentLogger,
  });
  for (let i = 0; i < records.length; i += 10_000) {
    const batch: QueueBatch = {
      Records: records.slice(i, i + 10_000).map((r, j) => ({
        messageId: `m${i + j}`,
        body: JSON.stringify(r),
        attributes: { ApproximateReceiveCount: "1" },
      })),
    };
    expect((await handler(batch)).batchItemFailures).toEqual([]);
  }
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "dmt-exports-"));
  warehouse = await startLocalWarehouse({ dataDir: dir, logger: silentLogger });
  for (const r of [...projA, ...outside, ...projB]) await warehouse.queue.send(r);
  await warehouse.queue.deliver();
  const app = appShell(silentLogger);
  app.use("/api/*", fakeAuth);
  mountRoutes(app, exportRoutes(warehouse.exports));
  const server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }) as Server;
  // Client and server share this process: a long export can stall the loop past the default 5 s
  // keep-alive, and the client would then reuse a socket the server is closing.
  server.keepAliveTimeout = 60_000;
  await new Promise((resolve) => server.once("listening", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  close = () => new Promise((resolve) => server.close(() => resolve()));
});
afterAll(async () => {
  await close();
  await warehouse.close();
  rmSync(dir, { recursive: true, force: true });
});

function post(body: unknown, project = "proj-a", init: RequestInit = {}) {
  return fetch(`${base}/api/v1/exports`, {
    method: "POST",
    headers: { "x-test-project": project },
    body: typeof body === "string" ? body : JSON.stringify(body),
    ...init,
  });
}

const range = { start: "2026-01-14", end: "2026-01-15" };

async function exportJson(
  filters: object = {},
  project = "proj-a",
  r = range,
): Promise<Record<string, unknown>[]> {
  const res = await post({ format: "json", range: r, filters }, project);
  expect(res.status).toBe(200);
  return (await res.json()) as Record<string, unknown>[];
}

/** A strict RFC 4180 reader. */
function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let cell = "";
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') {
        cell += '"';
        i++;
      } else if (c === '"') quoted = false;
      else cell += c;
    } else if (c === '"') quoted = true;
    else if (c === ",") {
      row.push(cell);
      cell = "";
    } else if (c === "\r" && text[i + 1] === "\n") {
      row.push(cell);
      rows.push(row);
      row = [];
      cell = "";
      i++;
    } else cell += c;
  }
  expect(cell === "" && row.length === 0).toBe(true);
  return rows;
}

const ids = (rows: { transaction_id?: unknown }[]) => rows.map((r) => r.transaction_id as string).sort();
const idsOf = (records: InteractionRecord[]) => records.map((r) => r.transaction_id).sort();

describe("POST /api/v1/exports, streamed", () => {
  it("answers JSON: one array with every record of the range, exactly as recorded", async () => {
    const res = await post({ format: "json", range });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/json; charset=utf-8");
    expect(res.headers.get("content-disposition")).toBe(
      'attachment; filename="dmt-export-proj-a-2026-01-14-to-2026-01-15.json"',
    );
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    const rows = (await res.json()) as Record<string, unknown>[];
    expect(ids(rows)).toEqual(idsOf(projA));
    const byId = new Map(rows.map((r) => [r.transaction_id, r]));
    for (const record of projA) {
      expect(byId.get(record.transaction_id)).toEqual({
        ...record,
        started_at: new Date(record.started_at).toISOString(),
        cost_usd: record.cost_micros === null ? null : decimalUsd(record.cost_micros),
      });
    }
  });

  it("answers CSV with a header, quoting and formula neutralising, reading back to the same text", async () => {
    const res = await post({ format: "csv", range });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/csv; charset=utf-8");
    expect(res.headers.get("content-disposition")).toContain(
      'filename="dmt-export-proj-a-2026-01-14-to-2026-01-15.csv"',
    );
    const [header, ...rows] = parseCsv(await res.text());
    expect(header).toEqual(EXPORT_COLUMNS);
    expect(rows).toHaveLength(projA.length);
    const column = (name: string) => EXPORT_COLUMNS.indexOf(name);
    const byId = new Map(rows.map((r) => [r[column("transaction_id")], r]));
    for (const record of projA) {
      const row = byId.get(record.transaction_id) as string[];
      expect(row[column("request_body")]).toBe(record.request_body);
      expect(row[column("cost_micros")]).toBe(String(record.cost_micros));
      expect(row[column("started_at")]).toBe(new Date(record.started_at).toISOString());
      expect(row[column("error_type")]).toBe(record.error_type ?? "");
    }
    // Bodies of the synthetic records carry commas, quotes, CRLF, unicode and a =HYPERLINK(...) prompt.
    const bodies = rows.map((r) => r[column("request_body")]).join("\n");
    expect(bodies).toContain('Quote \\"this\\", please, and a comma');
    expect(bodies).toContain("Ünïcödé — 日本語 — emoji 🚀");
  });

  it("neutralises cells a spreadsheet would run", async () => {
    await land([
      {
        ...syntheticRecord(200, { projectId: "proj-f" }),
        request_body: "=cmd|' /C calc'!A0",
        user_agent: "@SUM(1+1)",
        model: "-1+1",
        response_body: "+2",
        error_code: "\t=1",
      },
    ]);
    const res = await post({ format: "csv", range: { start: "2026-01-15", end: "2026-01-15" } }, "proj-f");
    const [, row] = parseCsv(await res.text());
    const at = (name: string) => row?.[EXPORT_COLUMNS.indexOf(name)];
    expect(at("request_body")).toBe("'=cmd|' /C calc'!A0");
    expect(at("user_agent")).toBe("'@SUM(1+1)");
    expect(at("model")).toBe("'-1+1");
    expect(at("response_body")).toBe("'+2");
    expect(at("error_code")).toBe("'\t=1");
  });

  it("includes both edge days whole, and nothing either side", async () => {
    const rows = await exportJson();
    const times = rows.map((r) => r.started_at as string);
    expect(times).toContain("2026-01-14T00:00:00.000Z");
    expect(times).toContain("2026-01-15T23:59:59.999Z");
    expect(times).not.toContain("2026-01-13T23:59:59.999Z");
    expect(times).not.toContain("2026-01-16T00:00:00.000Z");
    expect(ids(await exportJson({}, "proj-a", { start: "2026-01-13", end: "2026-01-13" }))).toEqual(
      idsOf([outside[0] as InteractionRecord]),
    );
  });

  it.each<[string, object, (r: InteractionRecord) => boolean]>([
    ["model", { model: "gpt-4o-mini" }, (r) => r.model === "gpt-4o-mini"],
    ["user_id", { user_id: "user-3" }, (r) => r.user_id === "user-3"],
    ["vendor", { vendor: "anthropic" }, (r) => r.vendor === "anthropic"],
    ["status_code", { status_code: 429 }, (r) => r.status_code === 429],
    ["billing_mode", { billing_mode: "byok" }, (r) => r.billing_mode === "byok"],
    [
      "several",
      { vendor: "openai", billing_mode: "managed" },
      (r) => r.vendor === "openai" && r.billing_mode === "managed",
    ],
  ])("filters by %s", async (_, filters, keep) => {
    const expected = idsOf(projA.filter(keep));
    expect(expected.length).toBeGreaterThan(0);
    expect(expected.length).toBeLessThan(projA.length);
    expect(ids(await exportJson(filters))).toEqual(expected);
  });

  it("answers an empty range with an empty array, or the header alone", async () => {
    const empty = { start: "2025-06-01", end: "2025-06-30" };
    const json = await post({ format: "json", range: empty });
    expect(json.status).toBe(200);
    expect(await json.text()).toBe("[]\n");
    const csv = await post({ format: "csv", range: empty });
    expect(csv.status).toBe(200);
    expect(await csv.text()).toBe(`${EXPORT_COLUMNS.join(",")}\r\n`);
    expect(await exportJson({ model: "no-such-model" })).toEqual([]);
  });

  it("never shows one project's rows to another, whatever the filters", async () => {
    expect(ids(await exportJson({}, "proj-b"))).toEqual(idsOf(projB));
    expect(await exportJson({ user_id: "only-in-b" }, "proj-a")).toEqual([]);
    expect(ids(await exportJson({ user_id: "only-in-b" }, "proj-b"))).toEqual(idsOf(projB));
    const all = await exportJson({}, "proj-a", { start: "2025-06-01", end: "2026-06-01" });
    expect(all.every((r) => r.project_id === "proj-a")).toBe(true);
    expect(await exportJson({}, "proj-none")).toEqual([]);
  });

  // Enough rows for two Parquet files (land() writes 10k a batch) and ten of DuckDB's 2,048-row chunks,
  // streamed through many buffers; export volumes are measured by bench/warehouse.bench.ts.
  const BIG = 20_000;
  it("streams rows from several files and chunks as one valid JSON array, and as one CSV line each", async () => {
    const records = Array.from({ length: BIG }, (_, i) =>
      syntheticRecord(i, { projectId: "proj-big", startMs: day(20), stepMs: 500 }),
    );
    await land(records);
    const r = { start: "2026-01-20", end: "2026-01-21" };
    const rows = await exportJson({}, "proj-big", r);
    expect(rows).toHaveLength(BIG);
    expect(new Set(rows.map((x) => x.transaction_id)).size).toBe(BIG);
    const csv = await (await post({ format: "csv", range: r }, "proj-big")).text();
    expect(parseCsv(csv)).toHaveLength(BIG + 1);
  });

  it("stops the query when the client goes away, and keeps serving", async () => {
    const abort = new AbortController();
    const res = await post(
      { format: "json", range: { start: "2026-01-20", end: "2026-01-21" } },
      "proj-big",
      {
        signal: abort.signal,
      },
    );
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    await reader.read();
    abort.abort();
    await expect(reader.read()).rejects.toThrow();
    expect(ids(await exportJson({}, "proj-b"))).toEqual(idsOf(projB));
  });
});

describe("POST /api/v1/exports, bad input", () => {
  it.each<[string, string, string, string]>([
    ["a body that is not JSON", "{format: json}", "invalid_json", "Request body is not valid JSON"],
    ["an empty body", "", "invalid_json", "Request body is not valid JSON: the body is empty."],
    ["a JSON array", "[]", "invalid_json", "The request body must be a JSON object."],
    ["no format", JSON.stringify({ range }), "missing_field", "Missing required field 'format'."],
    [
      "an unknown format",
      JSON.stringify({ format: "xlsx", range }),
      "invalid_field",
      "Invalid field 'format': must be one of json, csv.",
    ],
    [
      "2026-02-30",
      JSON.stringify({ format: "csv", range: { start: "2026-02-30", end: "2026-03-01" } }),
      "invalid_field",
      "Invalid field 'range.start': 2026-02-30 is not a calendar date.",
    ],
    [
      "start after end",
      JSON.stringify({ format: "csv", range: { start: "2026-02-02", end: "2026-02-01" } }),
      "invalid_field",
      "Invalid field 'range': start 2026-02-02 is after end 2026-02-01.",
    ],
    [
      "a span over the maximum",
      JSON.stringify({ format: "csv", range: { start: "2024-01-01", end: "2025-01-01" } }),
      "invalid_field",
      "Invalid field 'range': covers 367 days",
    ],
    [
      "SQL in a filter",
      JSON.stringify({ format: "json", range, filters: { model: "' OR 1=1 --" } }),
      "invalid_field",
      "Invalid field 'filters.model'",
    ],
    [
      "a filter of the wrong type",
      JSON.stringify({ format: "json", range, filters: { status_code: "500" } }),
      "invalid_field",
      "Invalid field 'filters.status_code'",
    ],
    [
      "unknown filter keys",
      JSON.stringify({ format: "json", range, filters: { project_id: "proj-b" } }),
      "invalid_field",
      "Invalid field 'filters': unknown key 'project_id'",
    ],
  ])("refuses %s with a 400 in the error shape", async (_, body, code, message) => {
    const res = await post(body);
    expect(res.status).toBe(400);
    const json = (await res.json()) as { error: { message: string; type: string; code: string } };
    expect(json.error.type).toBe("invalid_request_error");
    expect(json.error.code).toBe(code);
    expect(json.error.message.startsWith(message)).toBe(true);
  });

  it("answers other methods with 405", async () => {
    const res = await fetch(`${base}/api/v1/exports`, { headers: { "x-test-project": "proj-a" } });
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("POST");
  });
});

describe("POST /api/v1/exports to a configured bucket", () => {
  it("writes the export to the project's folder and answers with its URL", async () => {
    const folder = join(dir, "my exports");
    await warehouse.settings.setExportDestination("proj-b", pathToFileURL(folder).href);
    try {
      const res = await post({ format: "csv", range }, "proj-b");
      expect(res.status).toBe(200);
      const body = (await res.json()) as {
        export_url: string;
        download_url: string;
        expires_at: string | null;
      };
      expect(body.export_url).toMatch(
        /^file:\/\/.*\/my%20exports\/\d{8}T\d{9}Z-dmt-export-proj-b-2026-01-14-to-2026-01-15\.csv$/,
      );
      expect(body.download_url).toBe(body.export_url);
      expect(body.expires_at).toBeNull();
      const written = readFileSync(fileURLToPath(body.export_url), "utf8");
      const [, ...rows] = parseCsv(written);
      expect(rows).toHaveLength(projB.length);
      // Other projects still stream.
      expect((await post({ format: "json", range })).headers.get("content-type")).toContain(
        "application/json",
      );
    } finally {
      await warehouse.settings.setExportDestination("proj-b", undefined);
    }
  });

  it("stands an s3:// destination in for a folder under the data dir", async () => {
    await warehouse.settings.setExportDestination("proj-a", "s3://acme-exports/dmt/");
    try {
      const res = await post({ format: "json", range: { start: "2026-01-13", end: "2026-01-13" } });
      const body = (await res.json()) as { export_url: string };
      expect(fileURLToPath(body.export_url).startsWith(join(dir, "buckets", "acme-exports", "dmt"))).toBe(
        true,
      );
      expect(ids(JSON.parse(readFileSync(fileURLToPath(body.export_url), "utf8")))).toEqual(
        idsOf([outside[0] as InteractionRecord]),
      );
    } finally {
      await warehouse.settings.setExportDestination("proj-a", undefined);
    }
  });

  it("refuses a destination that is not s3:// or an absolute file URL", async () => {
    await expect(warehouse.settings.setExportDestination("proj-a", "gs://bucket/x")).rejects.toThrow(
      "s3://bucket/prefix",
    );
    await expect(warehouse.settings.setExportDestination("proj-a", "s3://Bad_Bucket")).rejects.toThrow(
      "bucket name",
    );
    await expect(warehouse.settings.setExportDestination("proj-a", "s3://bucket/../x")).rejects.toThrow(
      "not allowed",
    );
  });
});
