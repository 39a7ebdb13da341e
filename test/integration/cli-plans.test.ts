import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoCredits } from "../../lambda/adapters/dynamodb/credits";
import { tableNames } from "../../lambda/adapters/dynamodb/tables";
import type { PlanView } from "../../lambda/core/plans";
import { type Simulator, startSimulator } from "../../lambda/local/simulator";
import { dmtJson, runDmt } from "../support/cli";
import { simulatorEnv, startTestHost, type TestHost } from "../support/host";

/**
 * `dmt plans create|update|list|show|delete` and `dmt projects update --plan` on the real local stack
 * with metering on: a project put on a plan pays its percentage over list price from the next call.
 */
let simulator: Simulator;
let stack: TestHost;
let dir: string;

beforeAll(async () => {
  simulator = await startSimulator();
  stack = await startTestHost({ ...simulatorEnv(simulator.origins), DMT_METERING: "on" });
  dir = stack.dataDir;
});
afterAll(async () => {
  await stack.stop();
  await simulator.close();
});

const body = {
  model: "gpt-4o-mini",
  messages: [{ role: "user", content: "Name three rivers." }],
  max_tokens: 100,
};

/** A chat call: what its answer says it cost (x-dmt-cost-usd) and its usage. */
async function chat(key: string) {
  const res = await fetch(`${stack.url}/openai/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const json = (await res.json()) as { usage: { prompt_tokens: number; completion_tokens: number } };
  expect(res.status).toBe(200);
  return { costUsd: res.headers.get("x-dmt-cost-usd"), usage: json.usage };
}

/** gpt-4o-mini at list price ($0.15 and $0.60 per million tokens) times (100 + percent)%, rounded up once. */
function billed(usage: { prompt_tokens: number; completion_tokens: number }, percent: number): string {
  const nanos = BigInt(usage.prompt_tokens * 150 + usage.completion_tokens * 600) * BigInt(100 + percent);
  const micros = (nanos + 99_999n) / 100_000n;
  return (Number(micros) / 1e6).toFixed(6).replace(/0+$/, "").replace(/\.$/, "");
}

describe("dmt plans", { timeout: 300_000 }, () => {
  it("creates, updates, lists and shows plans; a project put on one pays it from the next call", async () => {
    const { key, projectId } = await stack.newKey();
    await new DynamoCredits(stack.db, tableNames(process.env)).grant(projectId, 5_000_000, "test");
    const atList = await chat(key);
    expect(atList.costUsd).toBe(billed(atList.usage, 0));

    const created = await dmtJson<{ plan: PlanView; warnings: string[] }>(
      ["plans", "create", "resell", "--percent", "20", "--model", "gpt-9*=5", "--name", "Resellers"],
      dir,
    );
    expect(created.plan.versions[0]).toMatchObject({ version: 1, percent: "20", models: { "gpt-9*": "5" } });
    expect(created.warnings).toEqual([
      "model glob 'gpt-9*' matches no model of the price catalogue (kept: it may name a newer model)",
    ]);
    const human = await runDmt(["plans", "create", "spare", "--percent=-10"], dir);
    expect(human.stdout).toContain("Created plan spare version 1: -10%.");

    expect(await dmtJson(["projects", "update", projectId, "--plan", "resell"], dir)).toMatchObject({
      projectId,
      plan: "resell",
    });
    // The proxy's cache (DMT_KEY_CACHE_MS=200 here) takes the change within its period.
    await new Promise((resolve) => setTimeout(resolve, 250));
    const onPlan = await chat(key);
    expect(onPlan.costUsd).toBe(billed(onPlan.usage, 20));

    const updated = await dmtJson<{ plan: PlanView }>(
      ["plans", "update", "resell", "--vendor", "openai=35"],
      dir,
    );
    expect(updated.plan.versions.map((v) => v.version)).toEqual([1, 2]);
    await new Promise((resolve) => setTimeout(resolve, 250));
    const raised = await chat(key);
    expect(raised.costUsd).toBe(billed(raised.usage, 35));

    const listed = await dmtJson<PlanView[]>(["plans", "list"], dir);
    expect(listed.map((p) => [p.planId, p.current?.version])).toEqual([
      ["default", 1],
      ["resell", 2],
      ["spare", 1],
    ]);
    const shown = await dmtJson<PlanView>(["plans", "show", "resell"], dir);
    expect(shown.current).toMatchObject({ version: 2, vendors: { openai: "35" } });
    expect((await runDmt(["plans", "show", "resell"], dir)).stdout).toMatch(/^Plan resell \(Resellers\)/);
    expect((await runDmt(["plans", "list"], dir)).stdout).toContain("+35%");
  });

  it("refuses bad input with one line and exit 1, changing nothing", async () => {
    const { projectId } = await stack.newKey();
    await runDmt(["plans", "create", "inuse", "--percent", "5"], dir);
    await runDmt(["projects", "update", projectId, "--plan", "inuse"], dir);
    const cases: [string[], RegExp][] = [
      [["plans", "create", "cheap", "--percent=-101"], /'percent': must be from -100/],
      [["plans", "create", "cheap", "--percent", "lots"], /'percent': must be a percentage/],
      [
        ["plans", "create", "cheap", "--percent", "5", "--vendor", "azure=3"],
        /'vendor': 'azure' is not one of/,
      ],
      [["plans", "create", "cheap", "--percent", "5", "--model", "gpt-4o"], /not <name>=<percent>/],
      [["plans", "update", "inuse", "--percent", "5", "--at", "2001-01-01"], /never repriced/],
      [["plans", "update", "default", "--percent", "5"], /DMT_PRICE_MARKUP/],
      [["plans", "delete", "inuse"], new RegExp(`in use by ${projectId}`)],
      [["projects", "update", projectId, "--plan", "ghost"], /Plan 'ghost' does not exist/],
      [
        ["projects", "update", "no-such-project", "--plan", "inuse"],
        /Project 'no-such-project' does not exist/,
      ],
    ];
    for (const [args, message] of cases) {
      const result = await runDmt(args, dir);
      expect(result.code, args.join(" ")).toBe(1);
      expect(result.stderr).toMatch(message);
      expect(result.stderr.trim().split("\n")).toHaveLength(1);
    }
    expect((await dmtJson<PlanView[]>(["plans", "list"], dir)).map((p) => p.planId)).not.toContain("cheap");
    expect(await dmtJson<PlanView>(["plans", "show", "inuse"], dir)).toMatchObject({
      versions: [{ version: 1 }],
    });
  });

  it("documents each command in its help, with examples", async () => {
    for (const name of ["create", "update", "list", "show", "delete"]) {
      const help = await runDmt(["plans", name, "--help"], dir);
      expect(help.code).toBe(0);
      expect(help.stdout).toContain(`dmt plans ${name}`);
      expect(help.stdout).toContain("--json");
    }
    expect((await runDmt(["projects", "update", "--help"], dir)).stdout).toContain("--plan <plan id>");
  });
});
