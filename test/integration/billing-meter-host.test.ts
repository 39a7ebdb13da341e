import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoCredits } from "../../lambda/adapters/dynamodb/credits";
import { tableNames } from "../../lambda/adapters/dynamodb/tables";
import { parseUsd } from "../../lambda/core/credits";
import { dmtJson, runDmt } from "../support/cli";
import { startTestHost, type TestHost } from "../support/host";
import { type StripeStandIn, startStripe } from "../support/stripe";
import { meterEventRoutes, meterEventsOf } from "../support/stripe/meter-events";

// The whole path on the local stack: a proxied managed call, its record through the warehouse
// consumer, its meter event through the meter queue to the Stripe stand-in; the CLI connects, maps,
// shows the status and resends. The Stripe key reaches only the sender.
const WAIT = { timeout: 60_000, interval: 100 };
let stripe: StripeStandIn;
let stack: TestHost;
let credits: DynamoCredits;

beforeAll(async () => {
  stripe = await startStripe({ modules: [meterEventRoutes] });
  stack = await startTestHost({
    DMT_METERING: "on",
    DMT_WAREHOUSE_FLUSH_MS: "100",
    DMT_STRIPE_SECRET_KEY: stripe.secretKey,
    DMT_STRIPE_API_URL: stripe.url,
  });
  credits = new DynamoCredits(stack.db, tableNames(process.env));
});
afterAll(async () => {
  await stack?.stop();
  await stripe?.close();
});

async function chat(key: string, user: string): Promise<string> {
  const res = await fetch(`${stack.url}/openai/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json", "x-user-id": user },
    body: JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }] }),
  });
  expect(res.status).toBe(200);
  await res.arrayBuffer();
  const id = res.headers.get("x-dmt-transaction-id");
  if (!id) throw new Error("no transaction id");
  return id;
}

interface Status {
  connections: {
    counts: { sent: number; waiting: number; failed: number };
    failed: { lastError: string }[];
  }[];
}

describe("billing exports on the local stack", () => {
  it("a managed call becomes one Stripe meter event; a user without a customer waits as failed until mapped and resent", async () => {
    const { key, projectId } = await stack.newKey({ tier: "pro" });
    await credits.grant(projectId, parseUsd("10"), "test");
    const alice = (await stripe.client().customers.create({ name: "alice" })).id;
    const dir = stack.dataDir;
    await dmtJson(
      ["billing", "stripe", "connect", "--project", projectId, "--meter", "dmt_usage", "--per-user"],
      dir,
    );
    await dmtJson(
      ["billing", "stripe", "map-user", "--project", projectId, "--user", "alice", "--customer", alice],
      dir,
    );

    const paid = await chat(key, "alice");
    const unmapped = await chat(key, "bob");
    await expect.poll(() => meterEventsOf(stripe).filter((e) => e.identifier === paid).length, WAIT).toBe(1);
    const [event] = meterEventsOf(stripe).filter((e) => e.identifier === paid);
    expect(event?.event_name).toBe("dmt_usage");
    expect(event?.payload.stripe_customer_id).toBe(alice);
    expect(Number(event?.payload.value)).toBeGreaterThan(0);

    const status = () => dmtJson<Status>(["billing", "status", "--project", projectId], dir);
    await expect
      .poll(async () => (await status()).connections[0]?.counts, WAIT)
      .toEqual({ sent: 1, waiting: 0, failed: 1 });
    expect((await status()).connections[0]?.failed[0]?.lastError).toMatch(/end user 'bob'/);
    const shown = await runDmt(["billing", "status", "--project", projectId], dir);
    expect(shown.stdout).toContain("sent 1, waiting 0, failed 1");
    expect(shown.stdout).toContain("no Stripe customer is mapped to end user 'bob'");

    const bob = (await stripe.client().customers.create({ name: "bob" })).id;
    await dmtJson(
      ["billing", "stripe", "map-user", "--project", projectId, "--user", "bob", "--customer", bob],
      dir,
    );
    expect(await dmtJson(["billing", "resend", "--project", projectId], dir)).toMatchObject({ queued: 1 });
    await expect
      .poll(() => meterEventsOf(stripe).filter((e) => e.identifier === unmapped).length, WAIT)
      .toBe(1);
    await expect
      .poll(async () => (await status()).connections[0]?.counts, WAIT)
      .toEqual({ sent: 2, waiting: 0, failed: 0 });

    // The key is in none of the CLI's output.
    expect(shown.stdout + shown.stderr).not.toContain(stripe.secretKey);
  });

  it("refuses bad input with the service's errors", async () => {
    const { projectId } = await stack.newKey();
    const dir = stack.dataDir;
    const noCustomer = await runDmt(
      ["billing", "stripe", "connect", "--project", projectId, "--meter", "m"],
      dir,
    );
    expect(noCustomer.code).not.toBe(0);
    expect(noCustomer.stderr).toContain("--customer is required without --per-user");
    const badCustomer = await runDmt(
      ["billing", "stripe", "connect", "--project", projectId, "--meter", "m", "--customer", "alice"],
      dir,
    );
    expect(badCustomer.stderr).toContain("a Stripe customer id: cus_...");
    const badMeter = await runDmt(
      ["billing", "stripe", "connect", "--project", projectId, "--meter", "no spaces", "--per-user"],
      dir,
    );
    expect(badMeter.stderr).toContain("Invalid field 'meter'");
    const unknown = await runDmt(["billing", "status", "--project", "no-such-project"], dir);
    expect(unknown.stderr).toContain("Project 'no-such-project' does not exist.");
    const notConnected = await runDmt(["billing", "stripe", "disconnect", "--project", projectId], dir);
    expect(notConnected.stderr).toContain(`Project '${projectId}' has no stripe connection.`);
  });
});
