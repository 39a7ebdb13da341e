import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoCredits } from "../../lambda/adapters/dynamodb/credits";
import { tableNames } from "../../lambda/adapters/dynamodb/tables";
import { decimalMicros } from "../../lambda/core/money";
import { readStatement } from "../../lambda/core/statement";
import { type FocusRow, focusProblems } from "../support/focus";
import { startTestHost, type TestHost } from "../support/host";

/**
 * A FOCUS export on the running local stack, against the credit statement of the same day, before and
 * after a user's deletion: the rows sum what the warehouse holds, and the statement (which a deletion
 * never changes) is those rows plus exactly what the deletion removed.
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

async function interactions(): Promise<{ user_id: string | null; cost_micros: number | null }[]> {
  const res = await post("/api/v1/exports", { format: "json", range: { start: today, end: today } });
  expect(res.status).toBe(200);
  return (await res.json()) as { user_id: string | null; cost_micros: number | null }[];
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

describe("a FOCUS export and the credit statement", { timeout: STEP_MS }, () => {
  it("agree, and after a user's deletion differ by exactly what was deleted", async () => {
    await expect.poll(async () => calls(await focus()), { timeout: STEP_MS, interval: 250 }).toBe(5);
    const before = await focus();
    expect(focusProblems(Object.keys(before[0] ?? {}), before)).toEqual([]);
    const charged = await statementCharges();
    expect(charged).toBeGreaterThan(0);
    expect(billed(before)).toBe(charged);
    const annMicros = (await interactions())
      .filter((r) => r.user_id === "u-ann")
      .reduce((a, r) => a + (r.cost_micros ?? 0), 0);

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

    const after = await focus();
    expect(focusProblems(Object.keys(after[0] ?? {}), after)).toEqual([]);
    // What remains: two calls, their exact sum, the same as the interaction rows still held.
    expect(calls(after)).toBe(2);
    const remaining = (await interactions()).reduce((a, r) => a + (r.cost_micros ?? 0), 0);
    expect(billed(after)).toBe(remaining);
    // The statement is unchanged; it is the rows that remain plus the deleted user's share.
    expect(await statementCharges()).toBe(charged);
    expect(billed(after) + annMicros).toBe(charged);
  });
});
