import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoCredits } from "../../lambda/adapters/dynamodb/credits";
import { tableNames } from "../../lambda/adapters/dynamodb/tables";
import type { Drift } from "../../lambda/core/reconcile";
import { type Simulator, startSimulator } from "../../lambda/local/simulator";
import { runDmt } from "../support/cli";
import { simulatorEnv, startTestHost, type TestHost } from "../support/host";

/**
 * `dmt reconcile` end to end: managed calls through the local stack to the simulator, which keeps what
 * it served and answers the vendors' organization usage reports from it; the CLI reads our side from
 * the warehouse (DuckDB over the data dir) and the vendor's side from the simulator's report.
 */

const OPENAI_ADMIN = "sk-admin-test-0123456789abcdefXYZ";
const ANTHROPIC_ADMIN = "sk-ant-admin01-test-0123456789abcdefXYZ";
const LONG_PROMPT = `Remember these facts for later. ${"The quick brown fox jumps over the lazy dog. ".repeat(120)}`;

// Every case runs the CLI as a child process (several for some): seconds each on a loaded machine.
const CLI_TIMEOUT = 300_000;

let simulator: Simulator;
let stack: TestHost;
let key: string;

const day = (offset: number) => new Date(Date.now() + offset * 86_400_000).toISOString().slice(0, 10);
// Yesterday to tomorrow holds every call even across midnight; 40 days back makes the OpenAI report
// (31 day buckets a page at most) answer in two pages.
const FROM = day(-40);
const TO = day(1);

interface ReconcileResult {
  vendor: string;
  drifted: number;
  rows: Drift[];
}

function reconcile(args: string[], env: Record<string, string> = {}) {
  return runDmt(["reconcile", ...args], stack.dataDir, {
    env: {
      DMT_UPSTREAM_OPENAI: simulator.origins.openai,
      DMT_UPSTREAM_ANTHROPIC: simulator.origins.anthropic,
      OPENAI_ADMIN_KEY: OPENAI_ADMIN,
      ANTHROPIC_ADMIN_KEY: ANTHROPIC_ADMIN,
      ...env,
    },
  });
}

async function reconcileJson(vendor: string): Promise<ReconcileResult> {
  const res = await reconcile(["--vendor", vendor, "--from", FROM, "--to", TO, "--json"]);
  expect(res.stderr).toBe("");
  expect(res.code).toBe(0);
  return JSON.parse(res.stdout) as ReconcileResult;
}

function post(path: string, body: unknown, headers: Record<string, string> = {}) {
  return fetch(`${stack.url}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
}

beforeAll(async () => {
  simulator = await startSimulator();
  stack = await startTestHost({ ...simulatorEnv(simulator.origins), DMT_METERING: "on" });
  const created = await stack.newKey({ tier: "pro" });
  key = created.key;
  await new DynamoCredits(stack.db, tableNames(process.env)).grant(created.projectId, 50_000_000, "test");

  const calls: Promise<Response>[] = [
    post("/openai/v1/chat/completions", {
      model: "gpt-4o-mini",
      messages: [{ role: "user", content: "Count the tokens of this, please." }],
    }),
    post("/openai/v1/chat/completions", {
      model: "gpt-4o-mini",
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: "user", content: "And of this one, streamed." }],
    }),
    post("/openai/v1/responses", { model: "gpt-4.1", input: "A response, counted with the completions." }),
    // Not a completion: OpenAI reports embeddings apart, so reconciliation leaves it out.
    post("/openai/v1/embeddings", { model: "text-embedding-3-small", input: "not in the report" }),
  ];
  for (const res of await Promise.all(calls)) {
    expect(res.status).toBe(200);
    await res.text();
  }
  // Written then read from the prompt cache: the report's input is the sum of the three kinds.
  for (let i = 0; i < 2; i++) {
    const res = await post(
      "/anthropic/v1/messages",
      {
        model: "claude-sonnet-4-6",
        max_tokens: 100,
        system: [{ type: "text", text: LONG_PROMPT, cache_control: { type: "ephemeral" } }],
        messages: [{ role: "user", content: "What did I ask you to remember?" }],
      },
      { "anthropic-version": "2023-06-01" },
    );
    expect(res.status).toBe(200);
    await res.text();
  }
  // Records reach Parquet (and DuckDB) once the queue has delivered them.
  await stack.drain();
}, CLI_TIMEOUT);

afterAll(async () => {
  await stack?.stop();
  await simulator?.close();
});

describe("dmt reconcile against the simulator", { timeout: CLI_TIMEOUT }, () => {
  it("openai: our managed completions match the vendor's report per model and day, over two pages", async () => {
    const result = await reconcileJson("openai");
    expect(result.drifted).toBe(0);
    expect(result.rows.map((r) => r.model).sort()).toEqual(["gpt-4.1", "gpt-4o-mini"]);
    for (const row of result.rows) {
      expect(row.ours.input).toBeGreaterThan(0);
      expect(row.ours.output).toBeGreaterThan(0);
      expect(row.theirs).toEqual(row.ours);
      expect(row.difference).toEqual({ input: 0, output: 0, cached: 0 });
    }
    const reports = simulator.requests.filter((r) => r.path === "/v1/organization/usage/completions");
    expect(reports.length).toBe(2);
    expect(reports[1]?.query).toContain("page=");
    expect(reports[0]?.headers.authorization).toBe(`Bearer ${OPENAI_ADMIN}`);
  });

  it("anthropic: cache writes and reads count as input on both sides; no drift", async () => {
    const result = await reconcileJson("anthropic");
    expect(result.drifted).toBe(0);
    expect(result.rows).toHaveLength(1);
    const [row] = result.rows;
    expect(row?.model).toBe("claude-sonnet-4-6");
    expect(row?.ours.cached).toBeGreaterThan(0);
    expect(row?.theirs).toEqual(row?.ours);
  });

  it("prints the drift when the vendor counts usage we did not see", async () => {
    // A call made with the organization's key elsewhere, and another model on another day.
    simulator.reportUsage("anthropic", {
      model: "claude-sonnet-4-6",
      uncachedInput: 120,
      cachedInput: 30,
      output: 45,
      day: day(0),
    });
    simulator.reportUsage("anthropic", {
      model: "claude-haiku-4-5-20251001",
      uncachedInput: 7,
      cachedInput: 0,
      output: 3,
      day: day(-2),
    });
    const before = (await reconcileJson("anthropic")).rows;
    const drifted = before.filter((r) => r.difference.input !== 0);
    expect(drifted).toHaveLength(2);
    const haiku = drifted.find((r) => r.model === "claude-haiku-4-5-20251001");
    expect(haiku).toMatchObject({
      day: day(-2),
      ours: { input: 0, output: 0, cached: 0 },
      theirs: { input: 7, output: 3, cached: 0 },
      difference: { input: 7, output: 3, cached: 0 },
    });
    const sonnet = drifted.find((r) => r.model === "claude-sonnet-4-6");
    expect(sonnet?.difference).toEqual({ input: 150, output: 45, cached: 30 });

    const printed = await reconcile(["--vendor", "anthropic", "--from", FROM, "--to", TO]);
    expect(printed.code).toBe(0);
    expect(printed.stdout).toContain("Drift on 2 of 2 model-days");
    const haikuLine = printed.stdout.split("\n").find((l) => l.includes("claude-haiku-4-5-20251001"));
    expect(haikuLine).toMatch(/0\/7\s+\+7\s+0\/3\s+\+3\s+0\/0\s+0/);
    expect(printed.stdout + printed.stderr).not.toContain(ANTHROPIC_ADMIN);
  });

  it("fails with one line that never shows the admin key when the vendor refuses it", async () => {
    simulator.inject({
      vendor: "openai",
      pathIncludes: "/organization/usage",
      fault: {
        kind: "status",
        status: 401,
        body: {
          error: { message: `Incorrect API key provided: ${OPENAI_ADMIN}.`, type: "invalid_request_error" },
        },
      },
    });
    const res = await reconcile(["--vendor", "openai", "--from", FROM, "--to", TO]);
    expect(res.code).toBe(1);
    expect(res.stderr.trim().split("\n")).toHaveLength(1);
    expect(res.stderr).toContain("openai usage report: HTTP 401");
    expect(res.stderr + res.stdout).not.toContain(OPENAI_ADMIN);
  });

  it("refuses an ordinary key in place of the admin key, without echoing it", async () => {
    const res = await reconcile(["--vendor", "openai", "--from", FROM, "--to", TO], {
      OPENAI_ADMIN_KEY: "sk-proj-not-an-admin-key-123",
    });
    expect(res.code).toBe(2);
    expect(res.stderr).toBe("dmt: usage: OPENAI_ADMIN_KEY is not an admin key (those start sk-admin-)\n");
  });

  it.each([
    [["--vendor", "openai", "--from", "2026-02-30", "--to", "2026-03-01"], "--from must be a day like"],
    [["--vendor", "openai", "--from", "yesterday", "--to", "2026-03-01"], "--from must be a day like"],
    [
      ["--vendor", "openai", "--from", "2026-03-02", "--to", "2026-03-01"],
      "--from 2026-03-02 is after --to 2026-03-01",
    ],
    [
      ["--vendor", "gemini", "--from", "2026-03-01", "--to", "2026-03-01"],
      "--vendor must be one of openai, anthropic",
    ],
    [["--from", "2026-03-01", "--to", "2026-03-01"], "--vendor is required"],
  ])("refuses %j with one line and exit 2", async (args, message) => {
    const res = await reconcile(args);
    expect(res.code).toBe(2);
    expect(res.stderr.trim().split("\n")).toHaveLength(1);
    expect(res.stderr).toContain(message);
  });

  it("refuses to run without the admin key, naming the variable", async () => {
    const res = await reconcile(["--vendor", "anthropic", "--from", "2026-03-01", "--to", "2026-03-01"], {
      ANTHROPIC_ADMIN_KEY: "",
    });
    expect(res.code).toBe(2);
    expect(res.stderr).toBe(
      "dmt: usage: ANTHROPIC_ADMIN_KEY is not set: the anthropic usage report needs an organization admin key (sk-ant-admin...)\n",
    );
  });
});
