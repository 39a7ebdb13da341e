import { describe, expect, it } from "vitest";
import { undiciWebhookSender } from "../../../lambda/adapters/undici/webhook-sender";
import { buildEvent, DEFAULT_EVENT_TYPES, parseEventTypes } from "../../../lambda/core/cloudevent";
import { decimalUsd as usd } from "../../../lambda/core/credits";
import { ApiError } from "../../../lambda/core/errors";
import { silentLogger } from "../../../lambda/core/logger";
import type { Delivery, WebhookStore } from "../../../lambda/core/webhook-delivery";
import { budgetThresholdsRule, lowBalanceRule } from "../../../lambda/events/alerts";
import { createDeliveries, eventMessage } from "../../../lambda/events/delivery";
import { wantedUsageOnly } from "../../../lambda/events/publisher";
import { addressAllowed, validateWebhookUrl } from "../../../lambda/events/webhooks";

function refusal(fn: () => unknown): { status: number; code: string; message: string } {
  try {
    fn();
  } catch (err) {
    if (err instanceof ApiError) return { status: err.status, code: err.code, message: err.message };
    throw err;
  }
  throw new Error("expected a refusal");
}

describe("CloudEvents", () => {
  it("builds a CloudEvents 1.0 event with a time-ordered id", () => {
    const event = buildEvent(
      { type: "key.created", projectId: "acme", subject: "k1", data: { a: 1 } },
      1_700_000_000_000,
    );
    expect(event).toEqual({
      specversion: "1.0",
      type: "key.created",
      source: "/projects/acme",
      id: expect.stringMatching(/^evt_[0-9a-z]{9}[0-9a-f]{16}$/),
      time: "2023-11-14T22:13:20.000Z",
      subject: "k1",
      datacontenttype: "application/json",
      projectid: "acme",
      data: { a: 1 },
    });
    const later = buildEvent({ type: "key.created", projectId: "acme", data: {} }, 1_700_000_000_001);
    expect(later.id > event.id).toBe(true);
  });

  it("gives every event of the same millisecond its own id", () => {
    const ids = new Set(
      Array.from(
        { length: 2_000 },
        () => buildEvent({ type: "key.created", projectId: "acme", data: {} }, 1).id,
      ),
    );
    expect(ids.size).toBe(2_000);
  });

  it("parses event type lists and refuses unknown types by name", () => {
    expect(parseEventTypes("balance.low, key.created,balance.low")).toEqual(["balance.low", "key.created"]);
    expect(refusal(() => parseEventTypes("balance.low,budget.exploded"))).toMatchObject({
      status: 400,
      code: "invalid_field",
      message: expect.stringContaining("unknown event type 'budget.exploded'"),
    });
    expect(refusal(() => parseEventTypes(""))).toMatchObject({ code: "invalid_field" });
    expect(refusal(() => parseEventTypes(["webhook.test"]))).toMatchObject({ code: "invalid_field" });
    expect(DEFAULT_EVENT_TYPES).not.toContain("usage.recorded");
  });

  it("writes money as exact decimal strings", () => {
    expect(usd(12_500_000)).toBe("12.50");
    expect(usd(1)).toBe("0.000001");
    expect(usd(-2_000_000)).toBe("-2.00");
  });
});

describe("webhook URLs", () => {
  it("takes http(s) URLs to public hosts", () => {
    expect(validateWebhookUrl("https://hooks.example.com/dmt?x=1", "public").toString()).toBe(
      "https://hooks.example.com/dmt?x=1",
    );
  });

  it("refuses other schemes, credentials and private, loopback or link-local addresses", () => {
    for (const url of ["ftp://example.com/x", "file:///etc/passwd", "not a url", "javascript:alert(1)"]) {
      expect(refusal(() => validateWebhookUrl(url, "public"))).toMatchObject({
        status: 400,
        code: "invalid_field",
      });
    }
    expect(refusal(() => validateWebhookUrl("https://user:pw@example.com/", "public")).message).toContain(
      "credentials",
    );
    for (const host of [
      "10.1.2.3",
      "192.168.0.10",
      "172.20.0.1",
      "169.254.169.254",
      "[fe80::1]",
      "[fd00::1]",
      "0.0.0.0",
    ]) {
      expect(refusal(() => validateWebhookUrl(`http://${host}/`, "public-or-loopback")).message).toContain(
        "private, loopback or link-local",
      );
    }
    expect(refusal(() => validateWebhookUrl("http://127.0.0.1:9000/", "public")).code).toBe("invalid_field");
    expect(refusal(() => validateWebhookUrl("http://[::1]/", "public")).code).toBe("invalid_field");
    expect(validateWebhookUrl("http://127.0.0.1:9000/", "public-or-loopback").port).toBe("9000");
  });

  it("judges IPv4-mapped IPv6 addresses as the IPv4 address they carry", () => {
    expect(addressAllowed("::ffff:10.0.0.1", "public")).toBe(false);
    expect(addressAllowed("::ffff:8.8.8.8", "public")).toBe(true);
    expect(addressAllowed("8.8.8.8", "public")).toBe(true);
    expect(addressAllowed("2606:4700::1111", "public")).toBe(true);
  });

  // Every IPv6 form that carries an IPv4 address, each with a private, a loopback, a link-local and a
  // public address inside; and the documentation ranges. [form, address, public, public-or-loopback]
  const table: [string, string, boolean, boolean][] = [
    ["IPv4-mapped, dotted", "::ffff:10.1.2.3", false, false],
    ["IPv4-mapped, dotted", "::ffff:127.0.0.1", false, true],
    ["IPv4-mapped, dotted", "::ffff:169.254.169.254", false, false],
    ["IPv4-mapped, hex", "::ffff:a01:203", false, false],
    ["IPv4-mapped, hex", "::ffff:7f00:1", false, true],
    ["IPv4-mapped, hex", "::ffff:a9fe:a9fe", false, false],
    ["IPv4-mapped, in full", "0:0:0:0:0:ffff:c0a8:1", false, false],
    ["IPv4-mapped, hex", "::ffff:808:808", true, true],
    ["IPv4-translated", "::ffff:0:10.1.2.3", false, false],
    ["IPv4-translated", "::ffff:0:7f00:1", false, false],
    ["IPv4-compatible, dotted", "::10.1.2.3", false, false],
    ["IPv4-compatible, dotted", "::127.0.0.1", false, false],
    ["IPv4-compatible, hex", "::a9fe:a9fe", false, false],
    ["IPv4-compatible, hex", "::c0a8:1", false, false],
    ["NAT64", "64:ff9b::10.1.2.3", false, false],
    ["NAT64", "64:ff9b::7f00:1", false, false],
    ["NAT64", "64:ff9b::a9fe:a9fe", false, false],
    ["NAT64", "64:ff9b::808:808", true, true],
    ["NAT64, local use", "64:ff9b:1::808:808", false, false],
    ["6to4", "2002:a01:203::1", false, false],
    ["6to4", "2002:7f00:1::", false, false],
    ["6to4", "2002:a9fe:a9fe::1", false, false],
    ["6to4", "2002:c0a8:101:1::1", false, false],
    ["6to4", "2002:808:808::1", true, true],
    ["Teredo", "2001:0:4136:e378:8000:63bf:3fff:fdd2", false, false],
    ["IPv4 documentation", "192.0.2.10", false, false],
    ["IPv4 documentation", "198.51.100.7", false, false],
    ["IPv4 documentation", "203.0.113.200", false, false],
    ["IPv4 documentation, mapped", "::ffff:203.0.113.200", false, false],
    ["IPv4 documentation, in 6to4", "2002:c000:20a::1", false, false],
    ["IPv6 documentation", "2001:db8::1", false, false],
    ["IPv6 documentation", "2001:db8:ffff::1", false, false],
    ["IPv6 documentation", "3fff::1", false, false],
    ["IPv6 loopback", "::1", false, true],
    ["IPv6 unspecified", "::", false, false],
    ["IPv6 public", "2606:4700::1111", true, true],
  ];
  it.each(table)("%s %s: public %s, with loopback %s", (_form, address, inPublic, withLoopback) => {
    expect(addressAllowed(address, "public")).toBe(inPublic);
    expect(addressAllowed(address, "public-or-loopback")).toBe(withLoopback);
    // A URL writes its IPv6 host in its own form: the checker judges that form alike.
    const host = address.includes(":") ? `[${address}]` : address;
    const url = () => validateWebhookUrl(`https://${host}/hook`, "public");
    if (inPublic) expect(url().hostname).toBeTruthy();
    else expect(refusal(url)).toMatchObject({ status: 400, code: "invalid_field" });
  });

  it("refuses at connect time a name that resolves to a loopback address when only public ones are allowed", async () => {
    const sender = undiciWebhookSender({ policy: "public", timeoutMs: 5000 });
    try {
      const result = await sender.post("http://localhost:9/hook", {}, "{}");
      expect(result).toMatchObject({ error: "refused_address" });
    } finally {
      await sender.close();
    }
  });
});

describe("low-balance rules", () => {
  it("takes an amount in dollars and refuses negative or malformed ones", () => {
    expect(lowBalanceRule("acme", "12.50", 0)).toMatchObject({ thresholdMicros: 12_500_000, armed: true });
    expect(refusal(() => lowBalanceRule("acme", "-5", 0))).toMatchObject({
      status: 400,
      code: "invalid_field",
      message: expect.stringContaining("must not be negative"),
    });
    expect(refusal(() => lowBalanceRule("acme", "five", 0)).code).toBe("invalid_field");
  });
});

describe("event fan-out", () => {
  it("lists a project's webhooks once per batch, however many of its events the batch carries", async () => {
    const listed: string[] = [];
    const webhooks = {
      list: async (projectId: string) => {
        listed.push(projectId);
        return projectId === "alpha"
          ? [
              {
                projectId,
                webhookId: "wh1",
                url: "https://example.com/",
                events: ["usage.recorded"],
                createdAt: 0,
              },
            ]
          : [];
      },
    } as unknown as WebhookStore;
    const begun: Delivery[] = [];
    const sent: string[] = [];
    const deliveries = createDeliveries({
      webhooks,
      log: {
        begin: async (d) => void begun.push(d),
        update: async () => {},
        get: async () => undefined,
        list: async () => [],
      },
      queue: { send: async (body) => void sent.push(body) },
      sender: { post: async () => ({ status: 200 }) },
      logger: silentLogger,
      clock: () => 1_700_000_000_000,
    });
    const event = (projectId: string, n: number) =>
      eventMessage(
        buildEvent(
          { type: "usage.recorded", projectId, subject: `tx${n}`, data: { transaction_id: `tx${n}` } },
          1_700_000_000_000 + n,
        ),
      );
    const bodies = [event("alpha", 1), event("beta", 2), event("alpha", 3), event("alpha", 4)];
    const result = await deliveries.handler({
      Records: bodies.map((body, i) => ({ messageId: `m${i}`, body, attributes: {} })),
    } as never);
    expect(result.batchItemFailures).toEqual([]);
    expect(listed.sort()).toEqual(["alpha", "beta"]);
    // Every event of the project still fans out to its webhook.
    expect(begun).toHaveLength(3);
    expect(sent).toHaveLength(3);
  });
});

describe("budget-threshold rules", () => {
  it("takes distinct whole percentages from 1 to 100, sorted", () => {
    expect(budgetThresholdsRule("acme", "100, 50,80", 0)).toMatchObject({
      ruleId: "budget-thresholds",
      kind: "budget_thresholds",
      thresholds: [50, 80, 100],
    });
    expect(budgetThresholdsRule("acme", "1", 0).thresholds).toEqual([1]);
  });

  it("refuses empty lists, non-integers, out-of-range values and duplicates, naming the field", () => {
    for (const [text, why] of [
      ["", "comma-separated whole percentages"],
      ["50,,80", "comma-separated whole percentages"],
      ["50.5", "'50.5' is not a whole percentage from 1 to 100"],
      ["0,50", "'0' is not a whole percentage"],
      ["101", "'101' is not a whole percentage"],
      ["-10", "'-10' is not a whole percentage"],
      ["half", "'half' is not a whole percentage"],
      ["50,80,50", "50 is given twice"],
      ["1,2,3,4,5,6,7,8,9,10,11", "at most 10"],
    ] as const) {
      const refused = refusal(() => budgetThresholdsRule("acme", text, 0));
      expect(refused).toMatchObject({ status: 400, code: "invalid_field" });
      expect(refused.message).toContain("budget_thresholds");
      expect(refused.message).toContain(why);
    }
  });
});

describe("usage events where the delivery queue is the only way out", () => {
  const usage = (projectId: string) => ({ type: "usage.recorded" as const, projectId, data: {} });
  function setUp(webhookEvents: Record<string, string[][]>) {
    let now = 1_700_000_000_000;
    const listed: string[] = [];
    const published: string[] = [];
    const store = {
      list: async (projectId: string) => {
        listed.push(projectId);
        if (projectId === "broken") throw new Error("store down");
        return (webhookEvents[projectId] ?? []).map((events, i) => ({
          projectId,
          webhookId: `wh${i}`,
          url: "https://example.com/",
          events,
          createdAt: 0,
        }));
      },
    } as unknown as WebhookStore;
    const publisher = wantedUsageOnly(
      {
        publish: async (input) => {
          published.push(`${input.projectId} ${input.type}`);
          return buildEvent(input, now);
        },
      },
      store,
      () => now,
      1_000,
    );
    return { publisher, listed, published, webhookEvents, advance: (ms: number) => (now += ms) };
  }

  it("leaves out a usage event no webhook of its project names, and still answers with the event", async () => {
    const { publisher, published } = setUp({ quiet: [["key.created", "balance.low"]] });
    const event = await publisher.publish(usage("quiet"));
    expect(event).toMatchObject({ type: "usage.recorded", projectid: "quiet" });
    expect(event.id).toMatch(/^evt_/);
    await publisher.publish(usage("none"));
    expect(published).toEqual([]);
  });

  it("publishes a usage event a webhook names, and every other type whatever the webhooks", async () => {
    const { publisher, published } = setUp({ loud: [["key.created"], ["usage.recorded"]] });
    await publisher.publish(usage("loud"));
    await publisher.publish({ type: "key.created", projectId: "none", data: {} });
    await publisher.publish({ type: "balance.low", projectId: "none", data: {} });
    expect(published).toEqual(["loud usage.recorded", "none key.created", "none balance.low"]);
  });

  it("lists a project's webhooks once per period, and sees a webhook added once the period is over", async () => {
    const { publisher, listed, published, webhookEvents, advance } = setUp({});
    await Promise.all([publisher.publish(usage("p")), publisher.publish(usage("p"))]);
    await publisher.publish(usage("p"));
    expect(listed).toEqual(["p"]);
    webhookEvents.p = [["usage.recorded"]];
    advance(999);
    await publisher.publish(usage("p"));
    expect(published).toEqual([]);
    advance(1);
    await publisher.publish(usage("p"));
    expect(listed).toEqual(["p", "p"]);
    expect(published).toEqual(["p usage.recorded"]);
  });

  it("publishes when the webhooks cannot be listed: the delivery decides, as without the check", async () => {
    const { publisher, published } = setUp({});
    await publisher.publish(usage("broken"));
    expect(published).toEqual(["broken usage.recorded"]);
  });
});
