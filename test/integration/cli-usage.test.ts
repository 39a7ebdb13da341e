import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoCredits } from "../../lambda/adapters/dynamodb/credits";
import { tableNames } from "../../lambda/adapters/dynamodb/tables";
import { createKey } from "../../lambda/core/accounts";
import { type CliResult, dmtJson, runDmt } from "../support/cli";
import { dashboardToken } from "../support/dashboard-token";
import { startTestHost, type TestHost } from "../support/host";

/**
 * `dmt usage` against the dashboard's Usage page on the same running stack: metered calls through the
 * proxy with two keys and with and without an end user, then the CLI's figures beside the dashboard
 * API's (`/usage`, `/usage/breakdown`) for the same period. Also key names in place of ids.
 */

/** Whole CLI processes beside a running stack: generous for a busy machine. */
const CLI_STEP_MS = 240_000;

let stack: TestHost;
let token: string;
let projectId: string;
const keys: Record<string, string> = {};
const twins: string[] = [];

async function dashboard<T>(path: string): Promise<T> {
  const res = await fetch(`${stack.url}/dashboard/api/projects/${projectId}${path}`, {
    headers: { Authorization: `Bearer ${token}` },
  });
  expect(res.status, path).toBe(200);
  return (await res.json()) as T;
}

const dmt = (args: string[]) => runDmt(args, stack.dataDir);

/** A refusal: the one line on stderr, the exit status, nothing on stdout. */
const refused = (res: CliResult, code: number, message: string) => {
  expect(res).toMatchObject({ code, stdout: "", stderr: `dmt: ${message}\n` });
};

interface Figures {
  requests: number;
  errors: number;
  input_tokens: number;
  output_tokens: number;
  cost_micros: number;
  charged_micros?: number;
}
interface CliUsage {
  project: string;
  by: string;
  from: string;
  to: string;
  rows: (Figures & Record<string, unknown>)[];
  totals: Required<Figures>;
}
interface DashboardUsage {
  days: string[];
  series: { vendor: string; model: string | null; [field: string]: unknown }[];
  totals: Record<string, Figures>;
}
interface DashboardBreakdown {
  lines: ({ id: string | null; deleted: boolean } & Required<Figures>)[];
  totals: Required<Figures>;
}

const FIELDS = ["requests", "errors", "input_tokens", "output_tokens", "cost_micros"] as const;
const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);
const seriesSum = (series: DashboardUsage["series"][number], field: string, at?: number) => {
  const values = series[field] as number[];
  return at === undefined ? sum(values) : (values[at] ?? 0);
};
const rowsSum = (rows: Figures[], field: keyof Figures) => sum(rows.map((r) => r[field] ?? 0));

beforeAll(async () => {
  stack = await startTestHost({ DMT_METERING: "on", DMT_WAREHOUSE_FLUSH_MS: "100" });
  token = await dashboardToken(stack.dataDir, stack.url, "carol");
  const me = await fetch(`${stack.url}/dashboard/api/me`, { headers: { Authorization: `Bearer ${token}` } });
  projectId = ((await me.json()) as { projects: { projectId: string }[] }).projects[0]?.projectId ?? "";
  await new DynamoCredits(stack.db, tableNames(process.env)).grant(projectId, 5_000_000, "test");

  const client = async (name: string) => {
    const { key, record } = await createKey(stack.store, { projectId, name }, Date.now());
    keys[name] = record.keyId;
    return new OpenAI({ apiKey: key, baseURL: `${stack.url}/openai/v1`, maxRetries: 0 });
  };
  const laptop = await client("laptop");
  const ci = await client("ci");
  const ask = (model: string, user?: string) => ({
    model,
    messages: [{ role: "user" as const, content: "count the apples" }],
    ...(user ? { user } : {}),
  });
  await laptop.chat.completions.create(ask("gpt-4o-mini", "u-ann"));
  await laptop.chat.completions.create(ask("gpt-4o-mini", "u-ben"));
  await laptop.chat.completions.create(ask("gpt-4o"));
  await ci.chat.completions.create(ask("gpt-4o-mini", "u-ann"));
  await ci.chat.completions.create(ask("gpt-4o-mini"));
  // A model without a price: refused by metering, counted as a failed call.
  await expect(ci.chat.completions.create(ask("no-such-model"))).rejects.toThrow();
  for (let i = 0; i < 2; i++) {
    twins.push((await createKey(stack.store, { projectId, name: "twin" }, Date.now())).record.keyId);
  }
  await stack.drain();
}, CLI_STEP_MS);
afterAll(() => stack?.stop());

describe("dmt usage", { timeout: CLI_STEP_MS }, () => {
  it("shows the Usage page's figures per day and per model, to the micro-dollar", async () => {
    const [page, byDay, byModel] = await Promise.all([
      dashboard<DashboardUsage>("/usage"),
      dmtJson<CliUsage>(["usage", "--project", projectId], stack.dataDir),
      dmtJson<CliUsage>(["usage", "--project", projectId, "--by", "model"], stack.dataDir),
    ]);
    const modes = Object.values(page.totals);
    expect(byDay.totals.requests).toBe(6);
    for (const field of FIELDS) expect(byDay.totals[field], field).toBe(sum(modes.map((m) => m[field])));
    expect(byDay.totals.charged_micros).toBe(page.totals.managed?.cost_micros);
    expect(byDay.totals.cost_micros).toBeGreaterThan(0);
    expect(byModel.totals).toEqual(byDay.totals);

    // Every day of the period, as the charts show them.
    expect(byDay.rows.map((r) => r.day)).toEqual(page.days);
    expect(byDay.rows).toHaveLength(30);
    page.days.forEach((_, i) => {
      for (const field of FIELDS) {
        expect(byDay.rows[i]?.[field]).toBe(sum(page.series.map((s) => seriesSum(s, field, i))));
      }
    });
    expect(byModel.rows.map((r) => [r.vendor, r.model])).toEqual(page.series.map((s) => [s.vendor, s.model]));
    page.series.forEach((series, i) => {
      for (const field of FIELDS) expect(byModel.rows[i]?.[field]).toBe(seriesSum(series, field));
    });
    for (const field of FIELDS) expect(rowsSum(byModel.rows, field)).toBe(byModel.totals[field]);
  });

  it("shows usage by key with each key's name, as the page's breakdown", async () => {
    const [page, cli, human] = await Promise.all([
      dashboard<DashboardBreakdown>("/usage/breakdown?by=key"),
      dmtJson<CliUsage>(["usage", "--project", projectId, "--by", "key"], stack.dataDir),
      dmt(["usage", "--project", projectId, "--by", "key"]),
    ]);
    expect(cli.rows).toEqual(
      page.lines.map(({ id, deleted: _, ...figures }) => ({
        key: id,
        name: id === keys.laptop ? "laptop" : "ci",
        ...figures,
      })),
    );
    expect(cli.rows.map((r) => r.name).sort()).toEqual(["ci", "laptop"]);
    expect(page.totals).toEqual(cli.totals);
    expect(human).toMatchObject({ code: 0, stderr: "" });
    expect(human.stdout).toContain(`${keys.laptop} ("laptop")`);
    expect(human.stdout).toMatch(/^Total: 6 requests \(1 failed\)/m);
  });

  it("shows usage by end user, with a row for calls that named none, adding up to the total", async () => {
    const [page, cli] = await Promise.all([
      dashboard<DashboardBreakdown>("/usage/breakdown?by=user"),
      dmtJson<CliUsage>(["usage", "--project", projectId, "--by", "user"], stack.dataDir),
    ]);
    const named = cli.rows.filter((r) => r.no_user !== true);
    expect(named).toEqual(page.lines.map(({ id, deleted: _, ...figures }) => ({ user: id, ...figures })));
    expect(named.map((r) => r.user).sort()).toEqual(["u-ann", "u-ben"]);
    const unnamed = cli.rows.find((r) => r.no_user === true);
    expect(unnamed).toMatchObject({ user: null, requests: 3 });
    for (const field of [...FIELDS, "charged_micros"] as const) {
      expect(rowsSum(cli.rows, field), field).toBe(cli.totals[field]);
    }
  });

  it("takes a period and prints it", async () => {
    const today = new Date().toISOString().slice(0, 10);
    const res = await dmt(["usage", "--project", projectId, "--from", today, "--to", today]);
    expect(res).toMatchObject({ code: 0, stderr: "" });
    expect(res.stdout).toContain(`Usage of ${projectId}, ${today} to ${today} (UTC), by day:`);
    expect(res.stdout).toMatch(new RegExp(`^${today}\\s+6\\s+1\\s`, "m"));
  });

  it.each<[string[], number, string]>([
    [["--by", "week"], 2, "usage: --by must be one of day, model, key, user"],
    [["--from", "2026-02-30"], 1, "Invalid field 'from': 2026-02-30 is not a calendar date."],
    [["--to", "yesterday"], 1, "Invalid field 'to': must be a date YYYY-MM-DD."],
    [
      ["--from", "2026-03-02", "--to", "2026-03-01"],
      1,
      "Invalid field 'from': 2026-03-02 is after to 2026-03-01.",
    ],
    [
      ["--from", "2024-01-01", "--to", "2026-01-01"],
      1,
      "Invalid field 'from': the range covers 732 days; at most 366 are shown at once.",
    ],
  ])("refuses %j with one line", async (args, code, message) => {
    refused(await dmt(["usage", "--project", projectId, ...args]), code, message);
  });

  it("refuses an unknown project and a missing --project", async () => {
    refused(await dmt(["usage", "--project", "nobody-here"]), 1, "Project 'nobody-here' does not exist.");
    refused(await dmt(["usage"]), 2, "usage: --project is required");
  });
});

describe("keys named by name", { timeout: CLI_STEP_MS }, () => {
  it("sets a budget on a key by its name and lists it with the name beside the id", async () => {
    const set = await dmt([
      "budgets",
      "set",
      "--project",
      projectId,
      "--key",
      "laptop",
      "--usd",
      "5",
      "--window",
      "day",
    ]);
    expect(set).toMatchObject({ code: 0, stderr: "" });
    expect(set.stdout).toMatch(
      new RegExp(`^Budget \\S+: key ${keys.laptop} \\("laptop"\\), \\$5\\.00 per day\\.\\n$`),
    );
    const listed = await dmtJson<{ key?: string; key_name?: string }[]>(
      ["budgets", "list", "--project", projectId],
      stack.dataDir,
    );
    expect(listed).toEqual([expect.objectContaining({ key: keys.laptop, key_name: "laptop" })]);
  });

  it("refuses a name two keys share, naming both ids", async () => {
    const budget = await dmt([
      "budgets",
      "set",
      "--project",
      projectId,
      "--key",
      "twin",
      "--usd",
      "5",
      "--window",
      "day",
    ]);
    const revoke = await dmt(["keys", "revoke", "--project", projectId, "twin"]);
    for (const res of [budget, revoke]) {
      expect(res).toMatchObject({ code: 1, stdout: "" });
      expect(res.stderr).toBe(
        `dmt: Invalid field 'key': 'twin' names 2 keys of project '${projectId}' (${twins.join(", ")}): give the key's id\n`,
      );
    }
    const missing = await dmt(["keys", "revoke", "--project", projectId, "nobody"]);
    refused(missing, 1, `Project '${projectId}' has no key with the id or name 'nobody'.`);
  });

  it("revokes a key by name within its project, and by id alone as before", async () => {
    const byName = await dmt(["keys", "revoke", "--project", projectId, "ci"]);
    expect(byName).toEqual({ code: 0, stdout: `Revoked key ${keys.ci} ("ci").\n`, stderr: "" });
    const byId = await dmt(["keys", "revoke", twins[0] ?? ""]);
    expect(byId).toEqual({ code: 0, stdout: `Revoked key ${twins[0]} ("twin").\n`, stderr: "" });
    // With one twin revoked the name is still shared: revoked keys keep their names.
    expect((await dmt(["keys", "revoke", "--project", projectId, "twin"])).code).toBe(1);
  });

  it("checks that a budget deleted with --project is one of that project's", async () => {
    const [budget] = await dmtJson<{ id: string }[]>(
      ["budgets", "list", "--project", projectId],
      stack.dataDir,
    );
    await dmtJson(["projects", "create", "elsewhere"], stack.dataDir);
    refused(
      await dmt(["budgets", "delete", "--project", "elsewhere", budget?.id ?? ""]),
      1,
      `Project 'elsewhere' has no budget '${budget?.id}'.`,
    );
    const deleted = await dmt(["budgets", "delete", "--project", projectId, budget?.id ?? ""]);
    expect(deleted).toEqual({ code: 0, stdout: `Deleted budget ${budget?.id}.\n`, stderr: "" });
  });
});
