import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll } from "vitest";
import { DynamoBudgets } from "../../lambda/adapters/dynamodb/budgets";
import { createDynamoClient, ensureTables } from "../../lambda/adapters/dynamodb/client";
import { tableNames } from "../../lambda/adapters/dynamodb/tables";
import { type EmbeddedDynamo, startEmbeddedDynamo } from "../../lambda/local/embedded-dynamo";
import { budgetCountersContract } from "../support/contracts/budget-counters";

// DynamoBudgets over the DynamoDB wire protocol, served by dynalite: tables of their own for each
// group of cases, and each "process" a client of its own.
const dir = mkdtempSync(join(tmpdir(), "dmt-contract-"));
let dynamo: EmbeddedDynamo;
const clients: DynamoDBClient[] = [];
const client = () => {
  const made = createDynamoClient({ endpoint: dynamo.endpoint });
  clients.push(made);
  return made;
};
beforeAll(async () => {
  dynamo = await startEmbeddedDynamo(dir);
});
afterAll(async () => {
  for (const made of clients) made.destroy();
  await dynamo.close();
  rmSync(dir, { recursive: true, force: true });
});

let groups = 0;
budgetCountersContract("DynamoBudgets over dynalite", async (clock) => {
  const tables = tableNames({}, `budgets-contract-${++groups}-`);
  await ensureTables(client(), tables);
  return {
    counters: new DynamoBudgets(client(), tables, clock),
    another: () => new DynamoBudgets(client(), tables, clock),
    close: async () => {},
  };
});
