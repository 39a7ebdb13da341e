import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { AthenaClient } from "@aws-sdk/client-athena";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { AthenaDeletionQuery } from "../../../../lambda/adapters/athena/deletion-query";

/**
 * A stand-in for the Athena service (AWS JSON 1.1 over HTTP): each query's states in turn, the failed
 * ones with their reasons, and one result page of a count.
 */
const fake = { calls: [] as string[], states: [] as string[], reasons: [] as string[] };
let server: Server;
let client: AthenaClient;
const sleeps: number[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      const action = String(req.headers["x-amz-target"]).replace("AmazonAthena.", "");
      fake.calls.push(action);
      let reply: unknown = {};
      if (action === "StartQueryExecution") reply = { QueryExecutionId: `q-${fake.calls.length}` };
      if (action === "GetQueryExecution") {
        const state = fake.states.shift() ?? "SUCCEEDED";
        const reason = state === "FAILED" ? (fake.reasons.shift() ?? "boom") : undefined;
        reply = { QueryExecution: { Status: { State: state, StateChangeReason: reason } } };
      }
      if (action === "GetQueryResults") {
        reply = {
          ResultSet: { Rows: [{ Data: [{ VarCharValue: "_col0" }] }, { Data: [{ VarCharValue: "3" }] }] },
        };
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
  sleeps.length = 0;
});

const query = () =>
  new AthenaDeletionQuery(client, {
    workGroup: "dmt-deletion",
    database: "dmt",
    table: "interactions",
    bucket: "data",
    pollMs: { first: 1, max: 1 },
    sleep: async (ms) => {
      sleeps.push(ms);
    },
  });
const target = { projectId: "proj-a", transactionIds: ["tx-1"], upTo: Date.UTC(2026, 0, 2) };
const missingFile =
  "HIVE_CANNOT_OPEN_SPLIT: Error opening Hive split s3://data/interactions/project=proj-a/dt=2026-01-01/" +
  "20260101T120000000Z-ab.parquet (offset=0, length=812): The specified key does not exist.";

describe("AthenaDeletionQuery", () => {
  it("runs a count again that failed on a file a compaction removed meanwhile", async () => {
    fake.states = ["FAILED", "SUCCEEDED"];
    fake.reasons = [missingFile];
    expect(await query().countMatching(target)).toBe(3);
    expect(fake.calls.filter((a) => a === "StartQueryExecution")).toHaveLength(2);
    expect(sleeps).toContain(5_000);
  });

  it("fails at once with Athena's reason on any other failure", async () => {
    fake.states = ["FAILED"];
    fake.reasons = ["COLUMN_NOT_FOUND: line 1:8: Column 'x' cannot be resolved"];
    await expect(query().countMatching(target)).rejects.toThrow("COLUMN_NOT_FOUND");
    expect(fake.calls.filter((a) => a === "StartQueryExecution")).toHaveLength(1);
  });
});
