import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoCredits } from "../../lambda/adapters/dynamodb/credits";
import { tableNames } from "../../lambda/adapters/dynamodb/tables";
import { createProject } from "../../lambda/core/accounts";
import type { CloudEvent } from "../../lambda/core/cloudevent";
import { dmtJson, runDmt } from "../support/cli";
import { startTestHost, type TestHost } from "../support/host";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver";

/**
 * `dmt alerts` and `dmt webhooks` against a running local server: the CLI's own events (grants, keys)
 * reach the server through the data dir's delivery journal and are delivered, signed, to a receiver.
 */

const WAIT = { timeout: 60_000, interval: 100 };
/** Each CLI command is a whole process: on a busy machine a few seconds each. */
const SLOW = { timeout: 600_000 };

let stack: TestHost;
let receiver: WebhookReceiver;

beforeAll(async () => {
  stack = await startTestHost();
  receiver = await startWebhookReceiver();
});

afterAll(async () => {
  await receiver?.close();
  await stack?.stop();
});

interface Added {
  id: string;
  secret: string;
  url: string;
  events: string[];
  project: string;
}

const verify = (secret: string) =>
  receiver.received.map(
    (r) => new Webhook(secret).verify(r.body, r.headers as Record<string, string>) as CloudEvent,
  );

describe("dmt webhooks", SLOW, () => {
  it("adds a webhook, shows its secret once, and delivers the CLI's own events to it", async () => {
    const dir = stack.dataDir;
    await dmtJson(["projects", "create", "hooked"], dir);
    const added = await dmtJson<Added>(
      ["webhooks", "add", "--project", "hooked", "--url", receiver.url],
      dir,
    );
    expect(added).toMatchObject({
      id: expect.stringMatching(/^wh_[0-9a-f]{16}$/),
      url: receiver.url,
      project: "hooked",
    });
    expect(added.secret).toMatch(/^whsec_/);
    expect(added.events).toContain("credits.granted");
    expect(added.events).not.toContain("usage.recorded");

    const listed = await runDmt(["webhooks", "list", "--project", "hooked", "--json"], dir);
    expect(listed.code).toBe(0);
    expect(listed.stdout).toContain(added.id);
    expect(listed.stdout).not.toContain(added.secret);

    await dmtJson(["credits", "grant", "--project", "hooked", "--usd", "12.5"], dir);
    const key = await dmtJson<{ id: string; key: string }>(
      ["keys", "create", "--project", "hooked", "--name", "ci"],
      dir,
    );
    await expect.poll(() => receiver.received.length, WAIT).toBe(2);
    const events = verify(added.secret);
    const granted = events.find((e) => e.type === "credits.granted");
    expect(granted?.data).toMatchObject({ amount_usd: "12.50", available_usd: "12.50", source: "cli" });
    const created = events.find((e) => e.type === "key.created");
    expect(created).toMatchObject({ subject: key.id, data: { key_id: key.id, name: "ci" } });
    // Never the key itself, nor its hash.
    expect(JSON.stringify(events)).not.toContain(key.key.slice(-43));

    const test = await runDmt(["webhooks", "test", "--project", "hooked", added.id], dir);
    expect(test).toMatchObject({
      code: 0,
      stdout: expect.stringMatching(/^webhook\.test evt_\w+: delivered \(200\)/),
    });

    const log = await dmtJson<{ eventType: string; status: string }[]>(
      ["webhooks", "deliveries", "--project", "hooked", added.id],
      dir,
    );
    expect(log.map((d) => [d.eventType, d.status])).toEqual(
      expect.arrayContaining([
        ["credits.granted", "delivered"],
        ["key.created", "delivered"],
        ["webhook.test", "delivered"],
      ]),
    );
    const latest = await dmtJson<unknown[]>(
      ["webhooks", "deliveries", "--project", "hooked", added.id, "--limit", "1"],
      dir,
    );
    expect(latest).toHaveLength(1);
    const badLimits: [string, string][] = [
      ["abc", "--limit must be a whole number"],
      ["0", "--limit must be from 1 to 100"],
      ["101", "--limit must be from 1 to 100"],
    ];
    for (const [bad, message] of badLimits) {
      const refused = await runDmt(
        ["webhooks", "deliveries", "--project", "hooked", added.id, `--limit=${bad}`],
        dir,
      );
      expect(refused, bad).toMatchObject({ code: 2, stdout: "", stderr: expect.stringContaining(message) });
    }
  });

  it("resends a dead delivery", async () => {
    const dir = stack.dataDir;
    await createProject(stack.store, "resent", "free", Date.now());
    const added = await dmtJson<Added>(
      ["webhooks", "add", "--project", "resent", "--url", receiver.url, "--events", "key.revoked"],
      dir,
    );
    receiver.script.push(410);
    const failed = await dmtJson<{ eventId: string; status: string; lastStatusCode: number }>(
      ["webhooks", "test", "--project", "resent", added.id],
      dir,
    );
    expect(failed).toMatchObject({ status: "dead", lastStatusCode: 410 });
    const resent = await runDmt(["webhooks", "resend", "--project", "resent", added.id, failed.eventId], dir);
    expect(resent.code).toBe(0);
    expect(resent.stdout).toContain(`${failed.eventId}: delivered (200)`);
    const missing = await runDmt(["webhooks", "resend", "--project", "resent", added.id, "evt_nope"], dir);
    expect(missing).toMatchObject({
      code: 1,
      stderr: expect.stringContaining("No delivery of event 'evt_nope'"),
    });
  });

  it("refuses bad URLs, unknown event types and missing options with one clear line", async () => {
    const dir = stack.dataDir;
    await createProject(stack.store, "strict", "free", Date.now());
    const add = (...args: string[]) => runDmt(["webhooks", "add", "--project", "strict", ...args], dir);
    const cases: [string[], number, string][] = [
      [["--url", "ftp://example.com/hook"], 1, "must use http or https"],
      [["--url", "https://user:secret@example.com/hook"], 1, "must not carry credentials"],
      [["--url", "http://10.0.0.8/hook"], 1, "private, loopback or link-local"],
      [
        ["--url", "https://example.com/hook", "--events", "key.created,budget.melted"],
        1,
        "unknown event type 'budget.melted'",
      ],
      [[], 2, "--url is required"],
    ];
    for (const [args, code, message] of cases) {
      const result = await add(...args);
      expect(result.code, args.join(" ")).toBe(code);
      expect(result.stderr).toContain(message);
      expect(result.stderr.trim().split("\n")).toHaveLength(1);
      expect(result.stderr).not.toContain("secret@");
    }
    const unknown = await runDmt(["webhooks", "delete", "--project", "strict", "wh_0000000000000000"], dir);
    expect(unknown).toMatchObject({ code: 1, stderr: expect.stringContaining("No webhook") });
  });
});

describe("dmt alerts", SLOW, () => {
  it("sets, lists and deletes a low-balance alert; refuses negative amounts", async () => {
    const dir = stack.dataDir;
    await createProject(stack.store, "alerted", "free", Date.now());
    await new DynamoCredits(stack.db, tableNames(process.env)).grant("alerted", 20_000_000, "test");
    const set = await runDmt(["alerts", "set", "--project", "alerted", "--low-balance-usd", "5"], dir);
    expect(set).toMatchObject({ code: 0, stdout: expect.stringContaining("below $5.00") });
    const listed = await dmtJson<{ ruleId: string; thresholdMicros: number; armed: boolean }[]>(
      ["alerts", "list", "--project", "alerted"],
      dir,
    );
    expect(listed).toEqual([
      expect.objectContaining({ ruleId: "low-balance", thresholdMicros: 5_000_000, armed: true }),
    ]);

    const negative = await runDmt(["alerts", "set", "--project", "alerted", "--low-balance-usd=-5"], dir);
    expect(negative).toMatchObject({ code: 1, stderr: expect.stringContaining("must not be negative") });
    const budgets = await runDmt(
      ["alerts", "set", "--project", "alerted", "--budget-thresholds", "80,50,100"],
      dir,
    );
    expect(budgets).toMatchObject({
      code: 0,
      stdout: expect.stringContaining("budget.threshold at 50%, 80%; budget.exceeded at 100%"),
    });
    const both = await dmtJson<{ ruleId: string; thresholds?: number[] }[]>(
      ["alerts", "list", "--project", "alerted"],
      dir,
    );
    expect(both).toEqual([
      expect.objectContaining({ ruleId: "budget-thresholds", thresholds: [50, 80, 100] }),
      expect.objectContaining({ ruleId: "low-balance" }),
    ]);
    for (const bad of ["50,50", "0", "150", "5O", ""]) {
      const refused = await runDmt(
        ["alerts", "set", "--project", "alerted", `--budget-thresholds=${bad}`],
        dir,
      );
      expect(refused).toMatchObject({ code: 1, stderr: expect.stringContaining("budget_thresholds") });
    }
    const neither = await runDmt(["alerts", "set", "--project", "alerted"], dir);
    expect(neither).toMatchObject({ code: 2, stderr: expect.stringContaining("--budget-thresholds") });
    expect((await runDmt(["alerts", "delete", "--project", "alerted", "budget-thresholds"], dir)).code).toBe(
      0,
    );
    const noProject = await runDmt(["alerts", "list", "--project", "nobody-here"], dir);
    expect(noProject).toMatchObject({ code: 1, stderr: expect.stringContaining("does not exist") });

    expect((await runDmt(["alerts", "delete", "--project", "alerted", "low-balance"], dir)).code).toBe(0);
    expect(await dmtJson(["alerts", "list", "--project", "alerted"], dir)).toEqual([]);
    const again = await runDmt(["alerts", "delete", "--project", "alerted", "low-balance"], dir);
    expect(again.code).toBe(1);
  });
});
