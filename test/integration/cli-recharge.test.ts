import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoPayments } from "../../lambda/adapters/dynamodb/payments";
import { tableNames } from "../../lambda/adapters/dynamodb/tables";
import { runDmt } from "../support/cli";
import { dashboardToken } from "../support/dashboard-token";
import { startTestHost, type TestHost } from "../support/host";
import { type StripeStandIn, startStripe } from "../support/stripe";

/**
 * `dmt credits recharge show|set|off`: the project's auto-recharge rule, the same one the Credits page
 * shows and sets (docs/billing.md), written while the server runs on the data dir. Its amount must be
 * one Buy credits offers (DMT_STRIPE_AMOUNTS_USD, here 10 and 25, as the server's).
 */
let stack: TestHost;
let stripe: StripeStandIn;
let payments: DynamoPayments;
const AMOUNTS = { DMT_STRIPE_AMOUNTS_USD: "10,25" };

beforeAll(async () => {
  stripe = await startStripe();
  stack = await startTestHost({
    DMT_STRIPE_SECRET_KEY: stripe.secretKey,
    DMT_STRIPE_WEBHOOK_SECRET: stripe.webhookSecret,
    DMT_STRIPE_API_URL: stripe.url,
    ...AMOUNTS,
  });
  payments = new DynamoPayments(stack.db, tableNames(process.env));
});
afterAll(async () => {
  await stack?.stop();
  await stripe?.close();
});

const dmt = (args: string[]) => runDmt(args, stack.dataDir, { env: AMOUNTS });
async function dmtJson(args: string[]) {
  const result = await dmt([...args, "--json"]);
  if (result.code !== 0) throw new Error(`dmt ${args.join(" ")} failed: ${result.stderr}`);
  return JSON.parse(result.stdout);
}

/** A dashboard user's personal project, and what its Credits page says about the rule. */
async function dashboardProject(userId: string) {
  const token = await dashboardToken(stack.dataDir, stack.url, userId);
  const get = async (path: string) => {
    const res = await fetch(`${stack.url}/dashboard/api${path}`, {
      headers: { Authorization: `Bearer ${token}` },
    });
    // biome-ignore lint/suspicious/noExplicitAny: answers are checked field by field
    return (await res.json()) as any;
  };
  const projectId = (await get("/me")).projects[0].projectId as string;
  return { projectId, purchase: () => get(`/projects/${projectId}/credits/purchase`) };
}

// Each command is a whole process: on a busy machine a handful of them take well over a minute.
describe("dmt credits recharge", { timeout: 300_000 }, () => {
  it("sets, shows and removes the rule the Credits page shows", async () => {
    const { projectId, purchase } = await dashboardProject(`recharge-cli-${process.pid}`);
    expect(await dmtJson(["credits", "recharge", "show", "--project", projectId])).toEqual({
      projectId,
      recharge: null,
      saved_card: false,
      armed: false,
      last_recharge: null,
    });

    const set = await dmtJson([
      "credits",
      "recharge",
      "set",
      "--project",
      projectId,
      "--threshold",
      "5.50",
      "--amount",
      "25",
    ]);
    expect(set).toMatchObject({ recharge: { threshold_usd: "5.50", amount_usd: "25.00" }, armed: true });
    expect((await purchase()).recharge).toEqual({ threshold_usd: "5.50", amount_usd: "25.00" });
    expect(await payments.getProfile(projectId)).toMatchObject({
      recharge: { thresholdMicros: 5_500_000, amountMicros: 25_000_000 },
      armed: true,
    });

    const shown = await dmt(["credits", "recharge", "show", "--project", projectId]);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toContain(
      `${projectId}: below $5.50 charged balance, buy $25.00 with the saved card; armed.`,
    );
    expect(shown.stdout).toContain("No saved card yet");

    const off = await dmt(["credits", "recharge", "off", "--project", projectId]);
    expect(off.code).toBe(0);
    expect(off.stdout.trim()).toBe(`${projectId}: no auto-recharge rule.`);
    expect((await purchase()).recharge).toBeNull();
  });

  it("refuses bad input with one line in the service's words and exit 1, changing nothing", async () => {
    const { projectId, purchase } = await dashboardProject(`recharge-bad-${process.pid}`);
    await dmtJson([
      "credits",
      "recharge",
      "set",
      "--project",
      projectId,
      "--threshold",
      "5",
      "--amount",
      "10",
    ]);
    const set = (threshold: string, amount: string, project = projectId) => [
      "credits",
      "recharge",
      "set",
      "--project",
      project,
      `--threshold=${threshold}`,
      `--amount=${amount}`,
    ];
    const cases: [string[], string][] = [
      [set("lots", "10"), "Invalid field 'threshold': must be an amount in US dollars"],
      [set("5", "ten"), "Invalid field 'amount': must be an amount in US dollars"],
      [set("-5", "10"), "Invalid field 'threshold': must be a positive amount"],
      [set("5", "-10"), "Invalid field 'amount': must be a positive amount"],
      [set("5", "0"), "Invalid field 'amount'"],
      [set("5", "30"), "Invalid field 'amount': must be one of 10.00, 25.00"],
      [set("5", "10.5"), "Invalid field 'amount': must be one of 10.00, 25.00"],
      [set("5", "10", "no-such-project"), "Project 'no-such-project' does not exist"],
      [
        ["credits", "recharge", "show", "--project", "no-such-project"],
        "Project 'no-such-project' does not exist",
      ],
      [
        ["credits", "recharge", "off", "--project", "no-such-project"],
        "Project 'no-such-project' does not exist",
      ],
    ];
    for (const [args, message] of cases) {
      const result = await dmt(args);
      expect(result.code, args.join(" ")).toBe(1);
      expect(result.stderr).toContain(message);
      expect(result.stderr.trim().split("\n")).toHaveLength(1);
    }
    // A missing option, or `--threshold -5` (read as an option): a usage error, exit 2.
    const usage: [string[], string][] = [
      [["credits", "recharge", "set", "--project", projectId, "--threshold", "5"], "--amount is required"],
      [
        ["credits", "recharge", "set", "--project", projectId, "--threshold", "-5", "--amount", "10"],
        "a value starting with '-' goes after '=': --threshold=<value>",
      ],
    ];
    for (const [args, message] of usage) {
      const result = await dmt(args);
      expect(result.code, args.join(" ")).toBe(2);
      expect(result.stderr).toContain(message);
    }
    expect((await purchase()).recharge).toEqual({ threshold_usd: "5.00", amount_usd: "10.00" });
  });

  it("documents each command in its help, with examples", async () => {
    for (const name of ["show", "set", "off"]) {
      const help = await dmt(["credits", "recharge", name, "--help"]);
      expect(help.code).toBe(0);
      expect(help.stdout).toContain(`dmt credits recharge ${name} --project <id>`);
      expect(help.stdout).toContain("Example");
    }
  });
});
