import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoCredits } from "../../lambda/adapters/dynamodb/credits";
import { tableNames } from "../../lambda/adapters/dynamodb/tables";
import { erasedUsageCodec } from "../../lambda/adapters/parquet/erased-usage";
import {
  ERASED_USAGE_GROUPING,
  ERASED_USAGE_SUMS,
  type ErasedUsageRow,
} from "../../lambda/core/erased-usage";
import { decimalMicros } from "../../lambda/core/money";
import { readStatement } from "../../lambda/core/statement";
import { type FocusRow, focusProblems } from "../support/focus";
import { startTestHost, type TestHost } from "../support/host";

/**
 * A FOCUS export on the running local stack, against the credit statement of the same day, before and
 * after a user's deletion: the deletion removes the user's rows and keeps their money as erased usage
 * (no user id, no transaction id), so the export's totals still equal the statement, while the
 * interaction rows hold only what remains.
 */

const STEP_MS = 240_000;
let stack: TestHost;
let key: string;
let projectId: string;
const today = new Date().toISOString().slice(0, 10);

async function post(path: string, body: unknown): Promise<Response> {
  return fetch(`${stack.url}${path}`, {
    method: "POST",
    headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
}

async function focus(): Promise<FocusRow[]> {
  const res = await post("/api/v1/exports", {
    format: "json",
    schema: "focus",
    range: { start: today, end: today },
  });
  expect(res.status).toBe(200);
  return (await res.json()) as FocusRow[];
}

interface Interaction {
  transaction_id: string;
  user_id: string | null;
  cost_micros: number | null;
}

async function interactions(): Promise<Interaction[]> {
  const res = await post("/api/v1/exports", { format: "json", range: { start: today, end: today } });
  expect(res.status).toBe(200);
  return (await res.json()) as Interaction[];
}

/** What the statement says the day's calls were charged: its charge lines, and what is still in flight. */
async function statementCharges(): Promise<number> {
  const credits = new DynamoCredits(stack.db, tableNames(process.env));
  const statement = await readStatement(credits, projectId, { from: today, to: today, grouping: "day" });
  const lines = statement.lines.filter((l) => l.kind === "charges");
  return -lines.reduce((a, l) => a + l.amountMicros, 0) + statement.inFlight.chargedMicros;
}

const billed = (rows: FocusRow[]) => rows.reduce((a, r) => a + decimalMicros(String(r.BilledCost)), 0);
const calls = (rows: FocusRow[]) => rows.reduce((a, r) => a + Number(r.x_Calls), 0);

beforeAll(async () => {
  stack = await startTestHost({ DMT_METERING: "on", DMT_WAREHOUSE_FLUSH_MS: "100" });
  ({ key, projectId } = await stack.newKey({ tier: "pro" }));
  await new DynamoCredits(stack.db, tableNames(process.env)).grant(projectId, 5_000_000, "test");
  const openai = new OpenAI({ apiKey: key, baseURL: `${stack.url}/openai/v1`, maxRetries: 0 });
  const ask = (model: string, content: string, user?: string) =>
    openai.chat.completions.create({
      model,
      messages: [{ role: "user", content }],
      ...(user ? { user } : {}),
    });
  await ask("gpt-4o-mini", "count the apples", "u-ann");
  await ask("gpt-4o", "name three rivers", "u-ann");
  await ask("gpt-4o-mini", "count the pears and plums", "u-ben");
  await ask("gpt-4o", "summarise the build log");
  await ask("gpt-4o-mini", "hello", "u-ann");
  await stack.drain();
}, STEP_MS);
afterAll(() => stack?.stop());

/** Every file of erased usage of the project, decoded: what a deletion left of the calls it removed. */
async function erasedUsageFiles(): Promise<{ key: string; bytes: Buffer; rows: ErasedUsageRow[] }[]> {
  const root = join(stack.dataDir, "warehouse", `erased-usage/project=${projectId}`);
  const keys = (await readdir(root, { recursive: true })).filter((k) => k.endsWith(".parquet"));
  return Promise.all(
    keys.map(async (key) => {
      const bytes = await readFile(join(root, key));
      return { key, bytes, rows: await erasedUsageCodec.decode(bytes) };
    }),
  );
}

describe("a FOCUS export and the credit statement", { timeout: STEP_MS }, () => {
  let annTransactions: string[] = [];
  let annMicros = 0;
  let charged = 0;

  it("agree, and still agree after a user's deletion: the export keeps the erased calls' money", async () => {
    await expect.poll(async () => calls(await focus()), { timeout: STEP_MS, interval: 250 }).toBe(5);
    const before = await focus();
    expect(focusProblems(Object.keys(before[0] ?? {}), before)).toEqual([]);
    charged = await statementCharges();
    expect(charged).toBeGreaterThan(0);
    expect(billed(before)).toBe(charged);
    expect(before.every((r) => r.x_ErasedCalls === 0)).toBe(true);
    const ann = (await interactions()).filter((r) => r.user_id === "u-ann");
    annMicros = ann.reduce((a, r) => a + (r.cost_micros ?? 0), 0);
    annTransactions = ann.map((r) => r.transaction_id);
    expect(annTransactions).toHaveLength(3);
    expect(annMicros).toBeGreaterThan(0);

    const queued = await post("/api/v1/data", { user_id: "u-ann", reason: "asked to be forgotten" });
    expect(queued.status).toBe(202);
    const { request_id } = (await queued.json()) as { request_id: string };
    await expect
      .poll(
        async () => {
          const res = await fetch(`${stack.url}/api/v1/data/${request_id}`, {
            headers: { Authorization: `Bearer ${key}` },
          });
          return ((await res.json()) as { status: string }).status;
        },
        { timeout: STEP_MS, interval: 250 },
      )
      .toBe("completed");

    // The interaction rows hold what remains: two calls, none of the user's.
    const remaining = await interactions();
    expect(remaining).toHaveLength(2);
    expect(remaining.some((r) => r.user_id === "u-ann")).toBe(false);
    const remainingMicros = remaining.reduce((a, r) => a + (r.cost_micros ?? 0), 0);
    expect(remainingMicros + annMicros).toBe(charged);

    // The FOCUS rows still count all five calls and equal the statement, which a deletion never changes;
    // the erased calls are marked.
    const after = await focus();
    expect(focusProblems(Object.keys(after[0] ?? {}), after)).toEqual([]);
    expect(calls(after)).toBe(5);
    expect(after.reduce((a, r) => a + Number(r.x_ErasedCalls), 0)).toBe(3);
    expect(await statementCharges()).toBe(charged);
    expect(billed(after)).toBe(charged);
    expect(after.reduce((a, r) => a + Number(r.ConsumedQuantity), 0)).toBe(
      before.reduce((a, r) => a + Number(r.ConsumedQuantity), 0),
    );
    // Filtered to a model, the export still adds that model's erased calls.
    const mini = await post("/api/v1/exports", {
      format: "json",
      schema: "focus",
      range: { start: today, end: today },
      filters: { model: "gpt-4o-mini" },
    });
    const miniRows = (await mini.json()) as FocusRow[];
    expect(calls(miniRows)).toBe(3);
    expect(billed(miniRows)).toBe(billed(before.filter((r) => r.x_Model === "gpt-4o-mini")));
    // Filtered to the user, nothing is left: erased usage belongs to no one.
    const byUser = await post("/api/v1/exports", {
      format: "json",
      schema: "focus",
      range: { start: today, end: today },
      filters: { user_id: "u-ann" },
    });
    expect(calls((await byUser.json()) as FocusRow[])).toBe(0);
  });

  it("keeps no trace of the user or their calls in the erased usage", async () => {
    expect(annTransactions).toHaveLength(3);
    const files = await erasedUsageFiles();
    expect(files.length).toBeGreaterThan(0);
    const rows = files.flatMap((f) => f.rows);
    expect(rows.reduce((a, r) => a + r.calls, 0)).toBe(3);
    expect(rows.reduce((a, r) => a + r.cost_micros, 0)).toBe(annMicros);
    // Only the grouping and the sums: no column could hold a user, a call or its content.
    for (const row of rows) {
      expect(Object.keys(row).sort()).toEqual([...ERASED_USAGE_GROUPING, ...ERASED_USAGE_SUMS].sort());
    }
    // Neither the rows, the file names nor the files' bytes hold the user id or a transaction id.
    const needles = ["u-ann", ...annTransactions];
    for (const file of files) {
      const text = `${file.key}\n${JSON.stringify(file.rows)}\n${file.bytes.toString("latin1")}`;
      for (const needle of needles) expect(text).not.toContain(needle);
    }
  });
});
