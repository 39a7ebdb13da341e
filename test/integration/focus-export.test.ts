/**
 * `POST /api/v1/exports` with `"schema": "focus"`: FOCUS 1.2 rows, checked against the spec's column
 * definitions (test/support/focus.ts), from the local DuckDB path and from the Athena path (its SQL run
 * by a stand-in Athena over the same Parquet files), with the interaction export as the reference.
 */

import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { AthenaClient } from "@aws-sdk/client-athena";
import { DuckDBInstance } from "@duckdb/node-api";
import { serve } from "@hono/node-server";
import type { MiddlewareHandler } from "hono";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { syntheticRecord } from "../../bench/warehouse-records";
import { AthenaWarehouseQuery } from "../../lambda/adapters/athena/export-query";
import { erasedUsageCodec } from "../../lambda/adapters/parquet/erased-usage";
import { type ExportRouteDeps, exportRoutes } from "../../lambda/app/data-api/exports";
import type { AppEnv } from "../../lambda/app/env";
import { mountRoutes } from "../../lambda/app/routing";
import { appShell } from "../../lambda/app/shell";
import { type ErasedUsageRow, erasedUsageGlueColumns, erasedUsageKey } from "../../lambda/core/erased-usage";
import { FOCUS_EXPORT_COLUMNS } from "../../lambda/core/focus";
import { silentLogger } from "../../lambda/core/logger";
import { TIER_LIMITS } from "../../lambda/core/model";
import { decimalMicros } from "../../lambda/core/money";
import type { InteractionRecord } from "../../lambda/core/record";
import { type LocalWarehouse, startLocalWarehouse } from "../../lambda/local/warehouse";
import { type FocusRow, focusProblems, parseFocusCsv } from "../support/focus";

let dir: string;
let warehouse: LocalWarehouse;
const servers: Server[] = [];
let local: string;
let aws: string;
let athenaClient: AthenaClient;
let duck: DuckDBInstance;

const at = (d: number, h = 12, m = 0, s = 0, ms = 0) => Date.UTC(2026, 0, d, h, m, s, ms);

/** Two keys, two days, byok and managed, failures, unpriced calls, and amounts no float adds exactly. */
const records: InteractionRecord[] = [
  ...Array.from({ length: 60 }, (_, i) => ({
    ...syntheticRecord(i, { projectId: "proj-a", startMs: at(14, 0, 10), stepMs: 47 * 60_000 }),
    key_id: i % 3 === 0 ? "key-ci000000000a" : "key-laptop00000b",
    cost_micros: i % 11 === 7 ? null : 100_003 + i * 7,
  })),
  // The day's first and last millisecond: in that day's charge period.
  { ...syntheticRecord(100, { projectId: "proj-a" }), started_at: at(14, 0, 0, 0, 0), cost_micros: 1 },
  {
    ...syntheticRecord(101, { projectId: "proj-a" }),
    started_at: at(15, 23, 59, 59, 999),
    cost_micros: 999_999,
  },
  // $1,000,000.000001 in one call: exact as decimal text, where a double would round.
  {
    ...syntheticRecord(102, { projectId: "proj-a" }),
    started_at: at(15, 6),
    model: "gpt-4o",
    key_id: "key-big000000000",
    cost_micros: 1_000_000_000_001,
  },
  // Priced under a plan with a 35% markup: billed 1,350 micro-USD, 1,000 at list price (docs/plans.md).
  {
    ...syntheticRecord(105, { projectId: "proj-a" }),
    started_at: at(15, 8),
    key_id: "key-plan00000000",
    cost_micros: 1350,
    cost_breakdown: JSON.stringify({
      price_version: "2026-01",
      markup: "1.35",
      micros: 1350,
      list_micros: 1000,
    }),
  },
  { ...syntheticRecord(103, { projectId: "proj-a" }), started_at: at(13, 23, 59, 59, 999) },
  { ...syntheticRecord(104, { projectId: "proj-a" }), started_at: at(16, 0, 0, 0, 0) },
  ...Array.from({ length: 5 }, (_, i) => syntheticRecord(i, { projectId: "proj-b", startMs: at(14) })),
];

const keyNames = new Map([
  ["key-ci000000000a", "=ci, nightly"],
  ["key-laptop00000b", "laptop"],
]);

const fakeAuth: MiddlewareHandler<AppEnv> = async (c, next) => {
  c.set("auth", {
    projectId: c.req.header("x-test-project") ?? "proj-a",
    keyId: "testkey000000000",
    tier: "free",
    rateLimit: TIER_LIMITS.free,
    store: "full",
  });
  await next();
};

async function listen(deps: ExportRouteDeps): Promise<string> {
  const app = appShell(silentLogger);
  app.use("/api/*", fakeAuth);
  mountRoutes(app, exportRoutes(deps));
  const server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }) as Server;
  await new Promise((resolve) => server.once("listening", resolve));
  servers.push(server);
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** The `erased_usage` table as its Parquet files; a table without rows while there are none. */
function erasedTable(root: string): string {
  if (!existsSync(join(root, "erased-usage"))) {
    const columns = erasedUsageGlueColumns().map(
      (c) => `NULL::${c.type === "bigint" ? "BIGINT" : "VARCHAR"} AS "${c.name}"`,
    );
    return `(SELECT NULL::VARCHAR AS project, NULL::VARCHAR AS dt, ${columns.join(", ")} WHERE false)`;
  }
  return `(SELECT * FROM read_parquet('${root}/erased-usage/*/*/*.parquet', hive_partitioning = true, hive_types = {'project': VARCHAR, 'dt': VARCHAR}))`;
}

/**
 * A stand-in Athena: runs the query text it is sent, with its execution parameters put in, in DuckDB
 * over the warehouse folder (the table as the Parquet files, `$path` as each row's file name), and
 * answers with text cells as Athena does. It proves the Athena path's SQL, not Athena's dialect.
 */
async function startAthena(root: string): Promise<string> {
  const results = new Map<string, (string | null)[][]>();
  const table = `(SELECT *, filename AS "$path" FROM read_parquet('${root}/interactions/*/*/*.parquet', hive_partitioning = true, hive_types = {'project': VARCHAR, 'dt': VARCHAR}, union_by_name = true, filename = true))`;
  const server = createServer((req, res) => {
    let text = "";
    req.on("data", (chunk) => {
      text += chunk;
    });
    req.on("end", async () => {
      const action = String(req.headers["x-amz-target"]).replace("AmazonAthena.", "");
      const body = JSON.parse(text) as Record<string, unknown>;
      let reply: unknown = {};
      if (action === "StartQueryExecution") {
        const params = body.ExecutionParameters as string[];
        const parts = String(body.QueryString)
          .replaceAll('"dmt"."interactions"', table)
          .replaceAll('"dmt"."erased_usage"', erasedTable(root))
          .split("?");
        const sql = parts.map((part, i) => (i === 0 ? part : `${params[i - 1]}${part}`)).join("");
        const connection = await duck.connect();
        // Athena's (Trino's) name for DuckDB's json_extract_string.
        await connection.run(
          "CREATE OR REPLACE MACRO json_extract_scalar(j, p) AS json_extract_string(j, p)",
        );
        const result = await connection.runAndReadAll(sql);
        connection.closeSync();
        const id = `q-${results.size}`;
        results.set(id, [
          result.columnNames(),
          ...result.getRows().map((r) => r.map((v) => (v === null ? null : String(v)))),
        ]);
        reply = { QueryExecutionId: id };
      }
      if (action === "GetQueryExecution") reply = { QueryExecution: { Status: { State: "SUCCEEDED" } } };
      if (action === "GetQueryResults") {
        const rows = results.get(String(body.QueryExecutionId)) ?? [];
        reply = {
          ResultSet: {
            Rows: rows.map((r) => ({ Data: r.map((v) => (v === null ? {} : { VarCharValue: v })) })),
          },
        };
      }
      res.writeHead(200, { "content-type": "application/x-amz-json-1.1" });
      res.end(JSON.stringify(reply));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  servers.push(server);
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "dmt-focus-"));
  warehouse = await startLocalWarehouse({ dataDir: dir, logger: silentLogger });
  for (const r of records) await warehouse.queue.send(r);
  await warehouse.queue.deliver();
  const deps: ExportRouteDeps = { ...warehouse.exports, keyNames: async () => keyNames };
  local = await listen(deps);
  duck = await DuckDBInstance.create(":memory:", { threads: "1" });
  athenaClient = new AthenaClient({
    endpoint: await startAthena(warehouse.objects.root),
    region: "eu-west-1",
    credentials: { accessKeyId: "test", secretAccessKey: "test" },
  });
  const athena = new AthenaWarehouseQuery(athenaClient, {
    workGroup: "dmt-exports",
    database: "dmt",
    table: "interactions",
    sleep: async () => {},
  });
  aws = await listen({ ...deps, query: athena });
});
afterAll(async () => {
  athenaClient?.destroy();
  duck?.closeSync();
  for (const server of servers) await new Promise((resolve) => server.close(resolve));
  await warehouse?.close();
  rmSync(dir, { recursive: true, force: true });
});

const range = { start: "2026-01-14", end: "2026-01-15" };

function post(base: string, body: unknown, project = "proj-a") {
  return fetch(`${base}/api/v1/exports`, {
    method: "POST",
    headers: { "x-test-project": project },
    body: JSON.stringify(body),
  });
}

async function focusJson(base: string, extra: object = {}): Promise<FocusRow[]> {
  const res = await post(base, { format: "json", schema: "focus", range, ...extra });
  expect(res.status).toBe(200);
  expect(res.headers.get("x-focus-version")).toBe("1.2");
  return (await res.json()) as FocusRow[];
}

async function interactionRows(extra: object = {}): Promise<InteractionRecord[]> {
  const res = await post(local, { format: "json", range, ...extra });
  expect(res.status).toBe(200);
  return (await res.json()) as InteractionRecord[];
}

const micros = (value: unknown) => decimalMicros(String(value));
const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);

describe.each([
  ["local (DuckDB)", () => local],
  ["AWS (Athena SQL)", () => aws],
])("FOCUS export, %s", (_, base) => {
  it("writes JSON rows that meet FOCUS 1.2's column definitions", async () => {
    const rows = await focusJson(base());
    expect(rows.length).toBeGreaterThan(4);
    for (const row of rows) expect(Object.keys(row)).toEqual(FOCUS_EXPORT_COLUMNS);
    expect(focusProblems(FOCUS_EXPORT_COLUMNS, rows)).toEqual([]);
  });

  it("writes CSV rows that meet them too, the same rows as the JSON", async () => {
    const res = await post(base(), { format: "csv", schema: "focus", range });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/csv/);
    expect(res.headers.get("content-disposition")).toContain("dmt-focus-proj-a-2026-01-14-to-2026-01-15.csv");
    const { columns, rows } = parseFocusCsv(await res.text());
    expect(columns).toEqual(FOCUS_EXPORT_COLUMNS);
    expect(focusProblems(columns, rows)).toEqual([]);
    const json = await focusJson(base());
    // CSV is text: numbers as digits, a key name that reads as a formula neutralised with a quote.
    const asText = json.map((row) =>
      Object.fromEntries(
        Object.entries(row).map(([k, v]) => [
          k,
          v === null ? null : k === "x_KeyName" && v === "=ci, nightly" ? "'=ci, nightly" : String(v),
        ]),
      ),
    );
    expect(rows).toEqual(asText);
  });

  it("sums each project, day, model, key and billing mode, exactly as the interaction rows", async () => {
    const [rows, calls] = await Promise.all([focusJson(base()), interactionRows()]);
    const keyOf = (day: string, vendor: unknown, model: unknown, key: unknown, mode: unknown) =>
      JSON.stringify([day, vendor, model, key, mode]);
    const expected = new Map<string, { calls: number; cost: number; tokens: number }>();
    for (const call of calls) {
      const k = keyOf(
        new Date(call.started_at).toISOString().slice(0, 10),
        call.vendor,
        call.model,
        call.key_id,
        call.billing_mode,
      );
      const group = expected.get(k) ?? { calls: 0, cost: 0, tokens: 0 };
      group.calls += 1;
      group.cost += call.cost_micros ?? 0;
      group.tokens += call.input_tokens + call.output_tokens;
      expected.set(k, group);
    }
    const got = new Map(
      rows.map((r) => [
        keyOf(String(r.ChargePeriodStart).slice(0, 10), r.x_Vendor, r.x_Model, r.x_KeyId, r.x_BillingMode),
        { calls: Number(r.x_Calls), cost: micros(r.BilledCost), tokens: Number(r.ConsumedQuantity) },
      ]),
    );
    expect(got).toEqual(expected);
    expect(sum(rows.map((r) => micros(r.BilledCost)))).toBe(sum(calls.map((c) => c.cost_micros ?? 0)));
    for (const row of rows) expect(micros(row.BilledCost)).toBe(row.x_CostMicros);
  });

  it("writes money as exact decimals from integer micro-dollars", async () => {
    const rows = await focusJson(base());
    const big = rows.find((r) => r.x_KeyId === "key-big000000000");
    expect(big).toMatchObject({ BilledCost: "1000000.000001", ListCost: "1000000.000001", x_Calls: 1 });
    // A plan's markup: billed above list; contracted and effective cost are what was billed.
    const plan = rows.find((r) => r.x_KeyId === "key-plan00000000");
    expect(plan).toMatchObject({
      BilledCost: "0.00135",
      ListCost: "0.001",
      ContractedCost: "0.00135",
      EffectiveCost: "0.00135",
      x_CostMicros: 1350,
      x_ListMicros: 1000,
    });
    const first = rows.filter((r) => r.ChargePeriodStart === "2026-01-14T00:00:00Z");
    expect(first.length).toBeGreaterThan(0);
    expect(first.every((r) => r.ChargePeriodEnd === "2026-01-15T00:00:00Z")).toBe(true);
    expect(new Set(rows.map((r) => r.BillingPeriodStart))).toEqual(new Set(["2026-01-01T00:00:00Z"]));
  });

  it("maps billing modes, keys and prices to their FOCUS columns", async () => {
    const rows = await focusJson(base());
    const managed = rows.find((r) => r.x_BillingMode === "managed" && r.x_Vendor === "openai");
    expect(managed).toMatchObject({
      ChargeCategory: "Usage",
      ServiceCategory: "AI and Machine Learning",
      ServiceSubcategory: "Generative AI",
      BillingCurrency: "USD",
      ConsumedUnit: "Tokens",
      InvoiceIssuerName: "dmt",
      ProviderName: "OpenAI",
      BillingAccountId: "proj-a",
      x_ProjectId: "proj-a",
    });
    expect(managed?.SkuId).toBe(`openai/${managed?.x_Model}`);
    expect(managed?.SkuPriceId).toBe(`openai/${managed?.x_Model}@2026-01`);
    const byok = rows.find((r) => r.x_BillingMode === "byok" && r.x_Vendor === "anthropic");
    expect(byok).toMatchObject({ InvoiceIssuerName: "Anthropic", ProviderName: "Anthropic" });
    expect(rows.find((r) => r.x_KeyId === "key-laptop00000b")?.x_KeyName).toBe("laptop");
    expect(rows.find((r) => r.x_KeyId === "key0123456789abcd")?.x_KeyName).toBeNull();
    // Unpriced calls count, and cost nothing rather than null.
    const unpriced = rows.filter((r) => Number(r.x_UnpricedCalls) > 0);
    expect(unpriced.length).toBeGreaterThan(0);
  });

  it("applies the export's filters and range, and sees one project only", async () => {
    const rows = await focusJson(base(), { filters: { vendor: "gemini" } });
    expect(rows.length).toBeGreaterThan(0);
    expect(rows.every((r) => r.x_Vendor === "gemini")).toBe(true);
    const all = await focusJson(base());
    expect(all.every((r) => r.x_ProjectId === "proj-a")).toBe(true);
    expect(sum(all.map((r) => Number(r.x_Calls)))).toBe(64);
    const res = await post(base(), {
      format: "json",
      schema: "focus",
      range: { start: "2025-01-01", end: "2025-01-02" },
    });
    expect(await res.text()).toBe("[]\n");
  });
});

describe("FOCUS export with erased usage (what a deletion keeps of the calls it removed)", () => {
  const erased = (over: Partial<ErasedUsageRow>): ErasedUsageRow => ({
    key_id: "key-ci000000000a",
    vendor: "openai",
    model: "gpt-4o-mini",
    billing_mode: "managed",
    price_version: "2026-01",
    calls: 2,
    priced_calls: 2,
    failed_calls: 1,
    input_tokens: 300,
    output_tokens: 40,
    cached_input_tokens: 0,
    cache_write_tokens: 0,
    reasoning_tokens: 0,
    cost_micros: 700_001,
    list_micros: 700_001,
    ...over,
  });
  const files: string[] = [];
  let heldRow: FocusRow;

  beforeAll(async () => {
    const rows = await focusJson(local);
    const held = rows.find(
      (r) => r.ChargePeriodStart === "2026-01-14T00:00:00Z" && r.x_BillingMode === "managed",
    );
    if (!held) throw new Error("no managed row on the 14th");
    // One group the warehouse still holds calls of, one it holds none of, one outside the range.
    const same = erased({
      key_id: String(held.x_KeyId),
      vendor: String(held.x_Vendor),
      model: held.x_Model === null ? null : String(held.x_Model),
      billing_mode: "managed",
      price_version: held.x_PriceVersion === null ? null : String(held.x_PriceVersion),
    });
    const put = async (day: string, name: string, content: ErasedUsageRow[]) => {
      const key = erasedUsageKey("proj-a", day, "del_test", name);
      await warehouse.objects.put(key, erasedUsageCodec.encode(content));
      files.push(key);
    };
    await put("2026-01-14", "a", [
      same,
      erased({ key_id: "key-gone00000000", model: null, price_version: null }),
    ]);
    await put("2026-01-20", "b", [erased({ cost_micros: 5 })]);
    await put("2026-01-14", "c", [same]);
    heldRow = held;
  });
  afterAll(async () => {
    for (const key of files) await warehouse.objects.delete(key);
  });

  it.each([
    ["local (DuckDB)", () => local],
    ["AWS (Athena SQL)", () => aws],
  ])(
    "%s: adds it to the rows of its day, marked, and totals the calls and the erased usage",
    async (_, base) => {
      const [rows, calls] = await Promise.all([focusJson(base()), interactionRows()]);
      expect(focusProblems(FOCUS_EXPORT_COLUMNS, rows)).toEqual([]);
      const heldMicros = sum(calls.map((c) => c.cost_micros ?? 0));
      // Three erased rows in the range (the 20th is outside it), 700,001 micro-USD and 2 calls each.
      expect(sum(rows.map((r) => micros(r.BilledCost)))).toBe(heldMicros + 3 * 700_001);
      expect(sum(rows.map((r) => Number(r.x_Calls)))).toBe(calls.length + 6);
      expect(sum(rows.map((r) => Number(r.x_ErasedCalls)))).toBe(6);
      // A group with no call left is a row of its own; a key deleted since has no name.
      const gone = rows.find((r) => r.x_KeyId === "key-gone00000000");
      expect(gone).toMatchObject({
        x_Calls: 2,
        x_ErasedCalls: 2,
        x_FailedCalls: 1,
        x_Model: null,
        SkuId: "openai/unnamed",
        x_KeyName: null,
      });
      // Two files of the same group add up, into the row of the calls still held.
      const same = rows.find(
        (r) =>
          r.ChargePeriodStart === heldRow.ChargePeriodStart &&
          r.x_KeyId === heldRow.x_KeyId &&
          r.x_Model === heldRow.x_Model &&
          r.x_BillingMode === heldRow.x_BillingMode &&
          r.x_PriceVersion === heldRow.x_PriceVersion,
      );
      expect(same).toMatchObject({ x_Calls: Number(heldRow.x_Calls) + 4, x_ErasedCalls: 4 });
      expect(micros(same?.BilledCost)).toBe(micros(heldRow.BilledCost) + 2 * 700_001);
      expect(same?.x_FailedCalls).toBe(Number(heldRow.x_FailedCalls) + 2);
      // Filters: a vendor the erased usage is not of leaves it out; a user or a status selects no erased call.
      const gemini = await focusJson(base(), { filters: { vendor: "gemini" } });
      expect(sum(gemini.map((r) => Number(r.x_ErasedCalls)))).toBe(0);
      const byStatus = await focusJson(base(), { filters: { status_code: 200 } });
      expect(sum(byStatus.map((r) => Number(r.x_ErasedCalls)))).toBe(0);
    },
  );

  it("leaves the interaction rows as they are: one row per call still held", async () => {
    const calls = await interactionRows();
    expect(calls).toHaveLength(64);
  });
});

describe("the export's schema", () => {
  it("defaults to interaction rows, unchanged byte for byte", async () => {
    const body = { format: "csv", range };
    const [plain, named] = await Promise.all([
      post(local, body).then((r) => r.text()),
      post(local, { ...body, schema: "interactions" }).then((r) => r.text()),
    ]);
    expect(named).toBe(plain);
    expect(plain.startsWith("schema_version,transaction_id,")).toBe(true);
  });

  it.each([
    ["an unknown schema", "FOCUS"],
    ["a number", 1],
    ["an empty string", ""],
    ["null", null],
  ])("refuses %s with a 400 naming the field", async (_, schema) => {
    const res = await post(local, { format: "json", schema, range });
    expect(res.status).toBe(400);
    const { error } = (await res.json()) as { error: { type: string; message: string } };
    expect(error.type).toBe("invalid_request_error");
    expect(error.message).toContain("schema");
  });

  it("writes a FOCUS export to the project's bucket destination", async () => {
    const folder = mkdtempSync(join(tmpdir(), "dmt-focus-bucket-"));
    await warehouse.settings.setExportDestination("proj-a", pathToFileURL(folder).href);
    try {
      const res = await post(local, { format: "csv", schema: "focus", range });
      expect(res.status).toBe(200);
      const [file] = readdirSync(folder);
      expect(file).toMatch(/dmt-focus-proj-a-2026-01-14-to-2026-01-15\.csv$/);
      const { columns, rows } = parseFocusCsv(readFileSync(join(folder, String(file)), "utf8"));
      expect(focusProblems(columns, rows)).toEqual([]);
      expect(rows.length).toBeGreaterThan(4);
    } finally {
      await warehouse.settings.setExportDestination("proj-a", undefined);
      rmSync(folder, { recursive: true, force: true });
    }
  });
});
