import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { AthenaClient } from "@aws-sdk/client-athena";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { AthenaWarehouseQuery } from "../../../../lambda/adapters/athena/export-query";
import { EXPORT_COLUMNS } from "../../../../lambda/core/export-format";
import { RECORD_COLUMNS } from "../../../../lambda/core/record";

/** A stand-in for the Athena service (AWS JSON 1.1 over HTTP), enough for one query's life cycle. */
interface FakeAthena {
  calls: { action: string; body: Record<string, unknown> }[];
  states: string[];
  /** Each failed state's reason, in turn ("boom" once they run out). */
  reasons: string[];
  pages: { rows: (string | undefined)[][]; next?: string }[];
}

const fake: FakeAthena = { calls: [], states: [], reasons: [], pages: [] };
let server: Server;
let client: AthenaClient;

function row(values: (string | undefined)[]) {
  return { Data: values.map((v) => (v === undefined ? {} : { VarCharValue: v })) };
}

beforeAll(async () => {
  server = createServer((req, res) => {
    let text = "";
    req.on("data", (chunk) => {
      text += chunk;
    });
    req.on("end", () => {
      const action = String(req.headers["x-amz-target"]).replace("AmazonAthena.", "");
      const body = JSON.parse(text) as Record<string, unknown>;
      fake.calls.push({ action, body });
      let reply: unknown = {};
      if (action === "StartQueryExecution") reply = { QueryExecutionId: "q-1" };
      if (action === "GetQueryExecution") {
        const state = fake.states.shift() ?? "SUCCEEDED";
        const reason = state === "FAILED" ? (fake.reasons.shift() ?? "boom") : "boom";
        reply = {
          QueryExecution: { QueryExecutionId: "q-1", Status: { State: state, StateChangeReason: reason } },
        };
      }
      if (action === "GetQueryResults") {
        const page = fake.pages.shift();
        reply = { ResultSet: { Rows: page?.rows.map(row) ?? [] }, NextToken: page?.next };
      }
      res.writeHead(200, { "content-type": "application/x-amz-json-1.1" });
      res.end(JSON.stringify(reply));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  client = new AthenaClient({
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    region: "eu-west-1",
    credentials: { accessKeyId: "test", secretAccessKey: "test" },
  });
});
afterAll(async () => {
  client.destroy();
  await new Promise((resolve) => server.close(resolve));
});
beforeEach(() => {
  fake.calls = [];
  fake.states = [];
  fake.reasons = [];
  fake.pages = [];
  sleeps.length = 0;
});

const sleeps: number[] = [];
const athena = () =>
  new AthenaWarehouseQuery(client, {
    workGroup: "dmt-exports",
    database: "dmt",
    table: "interactions",
    pageSize: 2,
    sleep: async (ms) => {
      sleeps.push(ms);
    },
  });

/** A result row in column order: `overrides` by column name, a plain value elsewhere. */
function resultRow(overrides: Record<string, string | undefined>): (string | undefined)[] {
  return RECORD_COLUMNS.map((c) => {
    if (c.name in overrides) return overrides[c.name];
    if (c.kind === "string") return `${c.name}-value`;
    if (c.kind === "boolean") return "false";
    if (c.kind === "timestamp") return "2026-01-02 03:04:05.678";
    return "1";
  });
}

async function collect(format: "json" | "csv", filters = {}) {
  const out: string[] = [];
  const query = { projectId: "proj-a", start: "2026-01-01", end: "2026-01-02", filters };
  for await (const batch of athena().rows(query, format)) out.push(...batch);
  return out;
}

describe("AthenaWarehouseQuery", () => {
  it("starts one parameterized query in the workgroup, polls until done, and reads every page", async () => {
    fake.states = ["QUEUED", "RUNNING", "SUCCEEDED"];
    fake.pages = [
      {
        rows: [EXPORT_COLUMNS as string[], resultRow({ transaction_id: "t1", model: undefined })],
        next: "p2",
      },
      { rows: [resultRow({ transaction_id: "t2", streamed: "true", cost_micros: "9007199254740991" })] },
    ];
    const rows = (await collect("json", { model: "' OR 1=1 --", status_code: 200 })).map((r) =>
      JSON.parse(r),
    );

    const start = fake.calls[0];
    expect(start?.action).toBe("StartQueryExecution");
    expect(start?.body.WorkGroup).toBe("dmt-exports");
    expect(start?.body.QueryExecutionContext).toEqual({ Database: "dmt" });
    expect(start?.body.ExecutionParameters).toEqual([
      "'proj-a'",
      "'2026-01-01'",
      "'2026-01-02'",
      "'proj-a'",
      "''' OR 1=1 --'",
      "200",
      // The subquery that counts each row once while a compaction swaps files: the same partitions.
      "'proj-a'",
      "'2026-01-01'",
      "'2026-01-02'",
    ]);
    expect(start?.body.QueryString).toMatch(
      /^SELECT "schema_version", .* FROM "dmt"\."interactions" WHERE "project" = \? AND/,
    );
    expect(start?.body.QueryString).toMatch(
      / AND NOT \("\$path" LIKE '%\/compact-%' AND "transaction_id" IN \(SELECT "transaction_id" FROM "dmt"\."interactions" WHERE "project" = \? AND "dt" BETWEEN \? AND \? AND "\$path" NOT LIKE '%\/compact-%'\)\)$/,
    );
    expect(start?.body.QueryString).not.toContain("proj-a");
    expect(fake.calls.filter((c) => c.action === "GetQueryExecution")).toHaveLength(3);
    expect(sleeps.slice(-2)).toEqual([100, 200]);
    const pages = fake.calls.filter((c) => c.action === "GetQueryResults").map((c) => c.body);
    expect(pages).toEqual([
      { QueryExecutionId: "q-1", MaxResults: 2 },
      { QueryExecutionId: "q-1", MaxResults: 2, NextToken: "p2" },
    ]);

    expect(rows.map((r) => r.transaction_id)).toEqual(["t1", "t2"]);
    expect(rows[0]).toMatchObject({
      model: null,
      streamed: false,
      started_at: "2026-01-02T03:04:05.678Z",
      status_code: 1,
    });
    expect(rows[1]).toMatchObject({ streamed: true, cost_micros: 9007199254740991 });
    expect(Object.keys(rows[0])).toEqual(EXPORT_COLUMNS);
  });

  it("encodes CSV lines with the shared CSV rules", async () => {
    fake.pages = [
      { rows: [EXPORT_COLUMNS as string[], resultRow({ user_agent: "=cmd", request_body: "a,b" })] },
    ];
    const [line] = await collect("csv");
    expect(line).toContain(`,"a,b",`);
    expect(line).toContain(",'=cmd,");
    expect(line).toMatch(/\r\n$/);
  });

  it("fails with Athena's reason when the query fails", async () => {
    fake.states = ["RUNNING", "FAILED"];
    await expect(collect("json")).rejects.toThrow("Athena query q-1 failed: boom");
  });

  // The reason Athena gives when a file it listed is gone when read (a compaction's swap removed it).
  const missingFile =
    "HIVE_CANNOT_OPEN_SPLIT: Error opening Hive split s3://data/interactions/project=proj-a/dt=2026-01-01/" +
    "20260101T120000000Z-ab.parquet (offset=0, length=812): The specified key does not exist. (Service: S3, Status Code: 404)";

  it("runs a query again that failed on a file a compaction removed meanwhile, and returns its rows once", async () => {
    fake.states = ["RUNNING", "FAILED", "RUNNING", "SUCCEEDED"];
    fake.reasons = [missingFile];
    fake.pages = [{ rows: [EXPORT_COLUMNS as string[], resultRow({ transaction_id: "tx-1" })] }];
    const rows = (await collect("json")).map((r) => JSON.parse(r) as { transaction_id: string });
    expect(rows.map((r) => r.transaction_id)).toEqual(["tx-1"]);
    const actions = fake.calls.map((c) => c.action);
    expect(actions.filter((a) => a === "StartQueryExecution")).toHaveLength(2);
    expect(actions.filter((a) => a === "GetQueryResults")).toHaveLength(1);
    // The same query both times, after a pause for the swap to end; a new request token, or Athena would
    // answer with the failed run.
    const started = fake.calls
      .filter((c) => c.action === "StartQueryExecution")
      .map(({ body: { ClientRequestToken, ...query } }) => ({ token: ClientRequestToken, query }));
    expect(started[1]?.query).toEqual(started[0]?.query);
    expect(started[1]?.token).not.toEqual(started[0]?.token);
    expect(sleeps).toContain(5_000);
  });

  it("gives up with Athena's reason when files keep vanishing, and does not run again on other failures", async () => {
    fake.states = ["FAILED", "FAILED", "FAILED", "FAILED"];
    fake.reasons = [missingFile, missingFile, missingFile, missingFile];
    await expect(collect("json")).rejects.toThrow("The specified key does not exist");
    expect(fake.calls.filter((c) => c.action === "StartQueryExecution")).toHaveLength(4);

    fake.calls = [];
    fake.states = ["FAILED"];
    fake.reasons = ["COLUMN_NOT_FOUND: line 1:8: Column 'x' cannot be resolved"];
    await expect(collect("json")).rejects.toThrow("COLUMN_NOT_FOUND");
    expect(fake.calls.filter((c) => c.action === "StartQueryExecution")).toHaveLength(1);
  });

  it("refuses a table name that would need quoting", () => {
    expect(
      () => new AthenaWarehouseQuery(client, { workGroup: "w", database: "dmt", table: 'x"; DROP' }),
    ).toThrow();
  });
});
