import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoBudgets } from "../../lambda/adapters/dynamodb/budgets";
import { DynamoCredits } from "../../lambda/adapters/dynamodb/credits";
import { tableNames } from "../../lambda/adapters/dynamodb/tables";
import { createKey } from "../../lambda/core/accounts";
import { setBudget } from "../../lambda/core/budgets";
import { decimalMicros, formatCents } from "../../lambda/core/money";
import { dmtJson, runDmt } from "../support/cli";
import { dashboardToken } from "../support/dashboard-token";
import { startTestHost, type TestHost } from "../support/host";

/**
 * One period, three readers: the dashboard API (Usage page, its breakdowns and the overview), `dmt usage
 * --json` and `POST /api/v1/exports`. A mix of metered calls (four keys, two priced models, named end users
 * and none, one call refused for an unpriced model and one over its key's budget) must give the same
 * spend in every one of them, in micro-dollars and written to the cent, and the same number of calls.
 */

/** Whole CLI processes and warehouse flushes beside a running stack: generous for a busy machine. */
const STEP_MS = 240_000;

let stack: TestHost;
let token: string;
let projectId: string;
let exportKey: string;
const keyNames: Record<string, string> = {};

interface Figures {
  requests: number;
  errors: number;
  refused: number;
  cost_micros: number;
  charged_micros: number;
}
interface CliUsage {
  from: string;
  to: string;
  rows: (Figures & Record<string, unknown>)[];
  totals: Figures;
}
interface DashboardBreakdown {
  lines: ({ id: string | null } & Figures)[];
  totals: Figures;
}
interface DashboardUsage {
  series: { vendor: string; model: string | null; cost_micros: number[]; requests: number[] }[];
}
interface Overview {
  spend: { last30: { from: string; to: string; micros: number } };
  listPriceUnchargedMicros: number;
  topModels: {
    vendor: string;
    model: string | null;
    costMicros: number;
    requests: number;
    refused: number;
  }[];
}
interface ExportRow {
  key_id: string;
  user_id: string | null;
  vendor: string;
  model: string | null;
  billing_mode: string;
  status_code: number;
  error_code: string | null;
  cost_micros: number | null;
  cost_usd: string | null;
}

async function dashboard<T>(path: string): Promise<T> {
  const res = await fetch(`${stack.url}/dashboard/api/projects/${projectId}${path}`, {
    headers: { Authorization: `Bearer ${token}` },
  });
  expect(res.status, path).toBe(200);
  return (await res.json()) as T;
}

async function exportRows(from: string, to: string): Promise<ExportRow[]> {
  const res = await fetch(`${stack.url}/api/v1/exports`, {
    method: "POST",
    headers: { Authorization: `Bearer ${exportKey}`, "Content-Type": "application/json" },
    body: JSON.stringify({ format: "json", range: { start: from, end: to } }),
  });
  expect(res.status).toBe(200);
  return (await res.json()) as ExportRow[];
}

const usage = (by: string) => dmtJson<CliUsage>(["usage", "--project", projectId, "--by", by], stack.dataDir);

const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);

/** Export rows summed per group: spend in micro-USD and the number of calls. */
function groupRows<G extends string | null>(rows: ExportRow[], groupOf: (row: ExportRow) => G) {
  const groups = new Map<G, { cost_micros: number; requests: number }>();
  for (const row of rows) {
    const group = groups.get(groupOf(row)) ?? { cost_micros: 0, requests: 0 };
    group.cost_micros += row.cost_micros ?? 0;
    group.requests += 1;
    groups.set(groupOf(row), group);
  }
  return groups;
}

beforeAll(async () => {
  stack = await startTestHost({ DMT_METERING: "on", DMT_WAREHOUSE_FLUSH_MS: "100" });
  token = await dashboardToken(stack.dataDir, stack.url, "carol");
  const me = await fetch(`${stack.url}/dashboard/api/me`, { headers: { Authorization: `Bearer ${token}` } });
  projectId = ((await me.json()) as { projects: { projectId: string }[] }).projects[0]?.projectId ?? "";
  await new DynamoCredits(stack.db, tableNames(process.env)).grant(projectId, 5_000_000, "test");

  const client = async (name: string) => {
    const { key, record } = await createKey(stack.store, { projectId, name }, Date.now());
    keyNames[record.keyId] = name;
    return { key, openai: new OpenAI({ apiKey: key, baseURL: `${stack.url}/openai/v1`, maxRetries: 0 }) };
  };
  const laptop = await client("laptop");
  const ci = await client("ci");
  const batch = await client("batch");
  exportKey = (await client("exporter")).key;
  // A key with a budget no call fits in (set before any call, so no cached budget hides it): refused, 402.
  const capped = await client("capped");
  const cappedId = Object.keys(keyNames).find((id) => keyNames[id] === "capped") ?? "";
  const budgets = new DynamoBudgets(stack.db, tableNames(process.env));
  await setBudget(
    stack.store,
    budgets,
    { projectId, keyId: cappedId, usd: "0.000001", window: "day" },
    Date.now(),
  );
  const ask = (model: string, content: string, user?: string) => ({
    model,
    messages: [{ role: "user" as const, content }],
    ...(user ? { user } : {}),
  });
  // Different prompts so the amounts differ and do not land on round cents.
  await laptop.openai.chat.completions.create(ask("gpt-4o-mini", "count the apples", "u-ann"));
  await laptop.openai.chat.completions.create(ask("gpt-4o-mini", "count the pears and plums", "u-ben"));
  await laptop.openai.chat.completions.create(ask("gpt-4o", "name three rivers in Europe"));
  await ci.openai.chat.completions.create(ask("gpt-4o", "summarise the build log", "u-ann"));
  await ci.openai.chat.completions.create(ask("gpt-4o-mini", "list the failing tests"));
  await batch.openai.chat.completions.create(ask("gpt-4o", "translate this to French", "u-cat"));
  await batch.openai.chat.completions.create(ask("gpt-4o-mini", "hello"));
  // A model without a price: refused by metering, counted as a failed call.
  await expect(ci.openai.chat.completions.create(ask("no-such-model", "anything"))).rejects.toThrow();
  await expect(
    capped.openai.chat.completions.create(ask("gpt-4o-mini", "over budget", "u-ann")),
  ).rejects.toMatchObject({
    status: 402,
  });
  await stack.drain();
}, STEP_MS);
afterAll(() => stack?.stop());

describe("totals across the dashboard, the CLI and the export", { timeout: STEP_MS }, () => {
  it("agree on the period's spend and calls, to the micro-dollar and to the cent", async () => {
    const cli = await usage("day");
    expect(cli.totals.requests).toBe(9);
    expect(cli.totals.errors).toBe(2);
    expect(cli.totals.cost_micros).toBeGreaterThan(0);

    // The export is read from the warehouse, which is flushed apart from the rollups.
    await expect
      .poll(async () => (await exportRows(cli.from, cli.to)).length, { timeout: STEP_MS, interval: 250 })
      .toBe(cli.totals.requests);
    const [rows, overview, byKey] = await Promise.all([
      exportRows(cli.from, cli.to),
      dashboard<Overview>("/overview"),
      dashboard<DashboardBreakdown>("/usage/breakdown?by=key"),
    ]);

    // Every row's cost_usd is its cost_micros, exactly.
    for (const row of rows) {
      expect(row.cost_usd === null ? null : decimalMicros(row.cost_usd)).toBe(row.cost_micros);
    }
    const exported = sum(rows.map((r) => r.cost_micros ?? 0));
    const exportedCharged = sum(
      rows.filter((r) => r.billing_mode === "managed").map((r) => r.cost_micros ?? 0),
    );
    const refusedRows = rows.filter((r) => r.status_code >= 400);
    expect(refusedRows).toHaveLength(cli.totals.errors);

    // The same period for all: the overview's last 30 days are the CLI's default period.
    expect([overview.spend.last30.from, overview.spend.last30.to]).toEqual([cli.from, cli.to]);
    const overviewListPrice = overview.spend.last30.micros + overview.listPriceUnchargedMicros;

    expect({
      cli: cli.totals.cost_micros,
      dashboard: byKey.totals.cost_micros,
      overview: overviewListPrice,
      export: exported,
    }).toEqual({
      cli: exported,
      dashboard: exported,
      overview: exported,
      export: exported,
    });
    expect([cli.totals.charged_micros, byKey.totals.charged_micros, overview.spend.last30.micros]).toEqual([
      exportedCharged,
      exportedCharged,
      exportedCharged,
    ]);
    const cents = formatCents(exported);
    expect([cli.totals.cost_micros, byKey.totals.cost_micros, overviewListPrice].map(formatCents)).toEqual([
      cents,
      cents,
      cents,
    ]);
    expect(sum(rows.map((r) => decimalMicros(r.cost_usd ?? "0")))).toBe(exported);

    // Calls: every reader counts the refused calls among the calls, and as failed.
    expect(byKey.totals.requests).toBe(rows.length);
    expect(byKey.totals.errors).toBe(refusedRows.length);
    expect(sum(overview.topModels.map((m) => m.requests))).toBe(rows.length);
    // Of the failed, the call dmt refused itself (the budget's 402) is counted apart, alike everywhere;
    // the unpriced model's 404 failed but is not a refusal kind.
    const dmtRefused = rows.filter((r) => r.status_code === 402 && r.error_code === "budget_exceeded");
    expect(dmtRefused).toHaveLength(1);
    expect([cli.totals.refused, byKey.totals.refused, sum(overview.topModels.map((m) => m.refused))]).toEqual(
      [1, 1, 1],
    );

    // The CLI's human summary writes the same totals to the cent.
    const human = await runDmt(["usage", "--project", projectId], stack.dataDir);
    expect(human).toMatchObject({ code: 0, stderr: "" });
    expect(human.stdout).toContain(
      `Total: ${rows.length} requests (${refusedRows.length} failed, 1 of them refused by dmt), `,
    );
    expect(human.stdout).toContain(
      `${formatCents(exported)} at list price, ${formatCents(exportedCharged)} charged to credits.`,
    );
  });

  it("agree per model", async () => {
    const cli = await usage("model");
    const [rows, page, overview] = await Promise.all([
      exportRows(cli.from, cli.to),
      dashboard<DashboardUsage>("/usage"),
      dashboard<Overview>("/overview"),
    ]);
    const exported = groupRows(rows, (r) => JSON.stringify([r.vendor, r.model]));
    const fromCli = new Map(
      cli.rows.map((r) => [
        JSON.stringify([r.vendor, r.model]),
        { cost_micros: r.cost_micros, requests: r.requests },
      ]),
    );
    const fromPage = new Map(
      page.series.map((s) => [
        JSON.stringify([s.vendor, s.model]),
        { cost_micros: sum(s.cost_micros), requests: sum(s.requests) },
      ]),
    );
    const fromOverview = new Map(
      overview.topModels.map((m) => [
        JSON.stringify([m.vendor, m.model]),
        { cost_micros: m.costMicros, requests: m.requests },
      ]),
    );
    expect(exported.size).toBe(3);
    expect(fromCli).toEqual(exported);
    expect(fromPage).toEqual(exported);
    expect(fromOverview).toEqual(exported);
    for (const [model, figures] of exported) {
      expect(formatCents(fromCli.get(model)?.cost_micros ?? Number.NaN), model).toBe(
        formatCents(figures.cost_micros),
      );
    }
  });

  it("agree per key, with each key named", async () => {
    const cli = await usage("key");
    const [rows, page] = await Promise.all([
      exportRows(cli.from, cli.to),
      dashboard<DashboardBreakdown>("/usage/breakdown?by=key"),
    ]);
    const exported = groupRows(rows, (r) => r.key_id);
    const fromCli = new Map(
      cli.rows.map((r) => [r.key, { cost_micros: r.cost_micros, requests: r.requests }]),
    );
    const fromPage = new Map(
      page.lines.map((l) => [l.id, { cost_micros: l.cost_micros, requests: l.requests }]),
    );
    expect([...exported.keys()].map((id) => keyNames[id ?? ""]).sort()).toEqual([
      "batch",
      "capped",
      "ci",
      "laptop",
    ]);
    expect(fromCli).toEqual(exported);
    expect(fromPage).toEqual(exported);
    for (const row of cli.rows) expect(row.name).toBe(keyNames[String(row.key)]);
  });

  it("agree per end user, calls without a user included, adding up to the total", async () => {
    const cli = await usage("user");
    const [rows, page, allCalls] = await Promise.all([
      exportRows(cli.from, cli.to),
      dashboard<DashboardBreakdown>("/usage/breakdown?by=user"),
      dashboard<DashboardUsage>("/usage"),
    ]);
    const exported = groupRows(rows, (r) => r.user_id);
    expect([...exported.keys()].sort()).toEqual([null, "u-ann", "u-ben", "u-cat"]);
    const fromCli = new Map(
      cli.rows.map((r) => [r.user, { cost_micros: r.cost_micros, requests: r.requests }]),
    );
    expect(fromCli).toEqual(exported);
    // The breakdown lists named users; the page's "No end user" row is what the Usage totals have beyond them.
    const named = new Map(
      page.lines.map((l) => [l.id, { cost_micros: l.cost_micros, requests: l.requests }]),
    );
    expect(named).toEqual(new Map([...exported].filter(([user]) => user !== null)));
    const projectTotal = (field: "cost_micros" | "requests") =>
      sum(allCalls.series.map((s) => sum(s[field])));
    expect({
      cost_micros: projectTotal("cost_micros") - page.totals.cost_micros,
      requests: projectTotal("requests") - page.totals.requests,
    }).toEqual(exported.get(null));
    expect(sum(cli.rows.map((r) => r.cost_micros))).toBe(sum(rows.map((r) => r.cost_micros ?? 0)));
  });
});
