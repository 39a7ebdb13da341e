import { ScanCommand } from "@aws-sdk/client-dynamodb";
import { marshall, unmarshall } from "@aws-sdk/util-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoBudgets } from "../../lambda/adapters/dynamodb/budgets";
import { DynamoCredits } from "../../lambda/adapters/dynamodb/credits";
import { DynamoUsageRollups } from "../../lambda/adapters/dynamodb/rollups";
import { tableNames } from "../../lambda/adapters/dynamodb/tables";
import { activePriceCatalogue } from "../../lambda/adapters/fs/price-catalogue";
import { updateKey } from "../../lambda/core/accounts";
import { counterId, setBudget, windowSpan } from "../../lambda/core/budgets";
import { formatUsd } from "../../lambda/core/credits";
import { holdMicros } from "../../lambda/core/metering";
import { type Simulator, startSimulator } from "../../lambda/local/simulator";
import { callBounds } from "../../lambda/vendors/bounds";
import { simulatorEnv, startTestHost, type TestHost } from "../support/host";

/**
 * Budgets through the real local stack (dynalite, the proxy, the simulator): holds never take a
 * window past its limit, however many calls run at once; refusals name the budget; headers say what is
 * left; key policies refuse models and tokens before anything is forwarded.
 */
let simulator: Simulator;
let stack: TestHost;
let budgets: DynamoBudgets;
let credits: DynamoCredits;

beforeAll(async () => {
  simulator = await startSimulator();
  stack = await startTestHost({ ...simulatorEnv(simulator.origins), DMT_METERING: "on" });
  budgets = new DynamoBudgets(stack.db, tableNames(process.env));
  credits = new DynamoCredits(stack.db, tableNames(process.env));
});
afterAll(async () => {
  await stack.stop();
  await simulator.close();
});

const body = {
  model: "gpt-4o-mini",
  messages: [{ role: "user", content: "Count the sheep in the field, one by one, slowly." }],
  max_tokens: 100,
};
const price = activePriceCatalogue({}).priceFor("openai", body.model, new Date());
if (!price) throw new Error("gpt-4o-mini has no price");
const hold = holdMicros(
  price,
  callBounds({ operation: "chat", json: body, form: undefined, uploadBytes: 0 }),
);
const usd = (micros: number) => formatUsd(micros).slice(1);
const cost = (usage: { prompt_tokens: number; completion_tokens: number }) =>
  Math.ceil((usage.prompt_tokens * 150 + usage.completion_tokens * 600) / 1000);

async function chat(key: string, headers: Record<string, string> = {}, payload: object = body) {
  const res = await fetch(`${stack.url}/openai/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json", ...headers },
    body: JSON.stringify(payload),
  });
  return { status: res.status, headers: res.headers, json: await res.json() };
}

describe("budgets under concurrency", () => {
  it("50 calls at once under three budgets never take the tightest past its limit", async () => {
    const { key, keyId, projectId } = await stack.newKey({ tier: "pro", name: "batch-job" });
    await credits.grant(projectId, 1000 * hold, "test");
    const now = Date.now();
    const covered = 20;
    const keyDay = await setBudget(
      stack.store,
      budgets,
      { projectId, keyId, usd: usd(covered * hold), window: "day" },
      now,
    );
    const projectMonth = await setBudget(
      stack.store,
      budgets,
      { projectId, usd: "100", window: "month" },
      now,
    );
    const userMonth = await setBudget(
      stack.store,
      budgets,
      { projectId, userId: "alice", usd: "50", window: "month" },
      now,
    );
    simulator.inject({ vendor: "openai", fault: { kind: "slowFirstByte", ms: 1500 }, times: 50 });

    const counter = counterId(keyDay, windowSpan("day", Date.now()), null);
    const samples: number[] = [];
    let running = true;
    const sampler = (async () => {
      while (running) {
        const spend = await budgets.spend(counter);
        samples.push(spend.spentMicros + spend.heldMicros);
      }
    })();
    const before = simulator.requests.length;
    const responses = await Promise.all(
      Array.from({ length: 50 }, () => chat(key, { "x-user-id": "alice" })),
    );
    running = false;
    await sampler;
    await stack.drain();

    const answered = responses.filter((r) => r.status === 200);
    const refused = responses.filter((r) => r.status === 402);
    expect(answered.length + refused.length).toBe(50);
    // Calls that ended early free the part of their hold they did not spend, so a busy machine may
    // answer a few more than `covered`; what never happens is a window past its limit.
    expect(answered.length).toBeGreaterThanOrEqual(covered / 2);
    expect(refused.length).toBeGreaterThan(0);
    expect(simulator.requests.length - before).toBe(answered.length);
    for (const r of refused) {
      expect(r.json.error).toMatchObject({ type: "billing_error", code: "budget_exceeded" });
      // The key by its id and its name.
      expect(r.json.error.message).toContain(`key ${keyId} ("batch-job")'s daily budget`);
      expect(r.json.error.message).toMatch(/resets at \d{4}-\d{2}-\d{2}T00:00:00\.000Z/);
    }
    for (const sample of samples) expect(sample).toBeLessThanOrEqual(covered * hold);

    // The tightest budget's headers: the key's day, which resets at the next UTC midnight.
    const midnight = Math.floor(windowSpan("day", Date.now()).resetsAt ?? 0) / 1000;
    for (const r of answered) {
      expect(r.headers.get("x-budget-reset")).toBe(String(midnight));
      expect(Number(r.headers.get("x-budget-remaining-usd"))).toBeLessThanOrEqual((covered * hold) / 1e6);
    }

    // After the calls, each window's spend is exactly what its calls cost.
    const spent = answered.reduce((sum, r) => sum + cost(r.json.usage), 0);
    expect(spent).toBeLessThanOrEqual(covered * hold);
    for (const budget of [keyDay, projectMonth, userMonth]) {
      const span = windowSpan(budget.window, Date.now());
      expect(await budgets.spend(counterId(budget, span, "alice"))).toEqual({
        spentMicros: spent,
        heldMicros: 0,
      });
    }
  });

  it("a budget that cannot cover a call refuses it before it is forwarded, naming scope, window and reset", async () => {
    const { key, projectId } = await stack.newKey({ tier: "pro" });
    await credits.grant(projectId, 100 * hold, "test");
    await setBudget(stack.store, budgets, { projectId, usd: usd(hold - 1), window: "month" }, Date.now());
    const before = simulator.requests.length;
    const r = await chat(key);
    expect(r.status).toBe(402);
    expect(r.json.error.code).toBe("budget_exceeded");
    expect(r.json.error.message).toContain("the project's monthly budget");
    expect(r.json.error.message).toContain(
      `It resets at ${new Date(windowSpan("month", Date.now()).resetsAt ?? 0).toISOString()}`,
    );
    expect(r.headers.get("x-budget-remaining-usd")).toBe(usd(hold - 1));
    expect(simulator.requests.length).toBe(before);
  });

  it("a soft budget reports and never refuses; BYOK calls count only with include-byok", async () => {
    const { key, projectId } = await stack.newKey({ tier: "pro" });
    await credits.grant(projectId, 100 * hold, "test");
    const soft = await setBudget(
      stack.store,
      budgets,
      { projectId, usd: "0.000001", window: "total", soft: true },
      Date.now(),
    );
    const r = await chat(key);
    expect(r.status).toBe(200);
    // A total window has no reset.
    expect(r.headers.get("x-budget-reset")).toBeNull();
    await stack.drain();
    const span = windowSpan("total", Date.now());
    expect((await budgets.spend(counterId(soft, span, null))).spentMicros).toBe(cost(r.json.usage));

    // A dual-key call is not counted by default.
    const dual = await chat(`${key};sk-own-vendor-key-0123456789`);
    expect(dual.status).toBe(200);
    await stack.drain();
    expect((await budgets.spend(counterId(soft, span, null))).spentMicros).toBe(cost(r.json.usage));
  });
});

describe("a budget set mid-window", () => {
  it("starts from what its scope spent in the window already, and shows it", async () => {
    const { key, keyId, projectId } = await stack.newKey({ tier: "pro" });
    await credits.grant(projectId, 100 * hold, "test");
    let before = 0;
    for (let i = 0; i < 6; i++) {
      const r = await chat(key);
      expect(r.status).toBe(200);
      before += cost(r.json.usage);
    }
    await stack.drain();
    // Room for half a call after what the key spent today: the next call cannot fit.
    const limit = before + Math.floor(hold / 2);
    const budget = await setBudget(
      stack.store,
      budgets,
      { projectId, keyId, usd: usd(limit), window: "day" },
      Date.now(),
      new DynamoUsageRollups(stack.db, tableNames(process.env)),
    );
    const span = windowSpan("day", Date.now());
    expect((await budgets.spend(counterId(budget, span, null))).spentMicros).toBe(before);
    const listed = await fetch(`${stack.url}/api/v1/budgets`, {
      headers: { authorization: `Bearer ${key}` },
    });
    const { data: views } = (await listed.json()) as { data: { id: string; spent_usd: string }[] };
    expect(views.find((view) => view.id === budget.budgetId)?.spent_usd).toBe(usd(before));
    await new Promise((resolve) => setTimeout(resolve, 250)); // the test stack caches budgets 200 ms
    const refused = await chat(key);
    expect(refused.status).toBe(402);
    expect(refused.json.error.code).toBe("budget_exceeded");
    // Set again (a new limit): counted once, not twice.
    await setBudget(
      stack.store,
      budgets,
      { projectId, keyId, usd: usd(limit + hold), window: "day" },
      Date.now(),
      new DynamoUsageRollups(stack.db, tableNames(process.env)),
    );
    expect((await budgets.spend(counterId(budget, span, null))).spentMicros).toBe(before);
  });
});

describe("key policies", () => {
  it("a model outside the key's allowlist is refused with 403 model_not_allowed, unforwarded", async () => {
    const { key, keyId, projectId } = await stack.newKey({ tier: "pro" });
    await credits.grant(projectId, 100 * hold, "test");
    await updateKey(stack.store, keyId, { models: ["gpt-4o-*", "claude-*"] }, []);
    await new Promise((resolve) => setTimeout(resolve, 250)); // the test stack caches keys 200 ms
    expect((await chat(key)).status).toBe(200);
    const before = simulator.requests.length;
    const refused = await chat(key, {}, { ...body, model: "gpt-3.5-turbo" });
    expect(refused.status).toBe(403);
    expect(refused.json.error).toMatchObject({ type: "permission_error", code: "model_not_allowed" });
    expect(simulator.requests.length).toBe(before);
  });

  it("a key limited to whisper-1 gets no other transcription model through a crafted upload", async () => {
    const { key, keyId, projectId } = await stack.newKey({ tier: "pro" });
    await credits.grant(projectId, 100 * hold, "test");
    await updateKey(stack.store, keyId, { models: ["whisper-1"] }, []);
    await new Promise((resolve) => setTimeout(resolve, 250));
    const boundary = "dmt-e2e-boundary-0123456789";
    const part = (headers: string, content: string) => `--${boundary}\r\n${headers}\r\n\r\n${content}\r\n`;
    const model = (name: string) => part('Content-Disposition: form-data; name="model"', name);
    const audio = part(
      'Content-Disposition: form-data; name="file"; filename="a.wav"\r\nContent-Type: audio/wav',
      "RIFF",
    );
    const close = `--${boundary}--\r\n`;
    const upload = (form: string, contentType = `multipart/form-data; boundary=${boundary}`) =>
      fetch(`${stack.url}/openai/v1/audio/transcriptions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": contentType },
        body: form,
      });
    expect((await upload(model("whisper-1") + audio + close)).status).toBe(200);
    const before = simulator.requests.length;
    const crafted = [
      // The vendor reads the boundary parameter, not the one inside `xboundary=`.
      {
        form: model("gpt-4o-transcribe") + audio.replace("RIFF", `--xx\r\n${model("whisper-1")}`) + close,
        contentType: `multipart/form-data; xboundary=xx; boundary=${boundary}`,
      },
      // A name in a header other than Content-Disposition names nothing.
      {
        form:
          model("gpt-4o-transcribe") +
          part('X-Note: a; name="model"\r\nContent-Disposition: form-data; name="prompt"', "whisper-1") +
          audio +
          close,
      },
      { form: model("whisper-1") + model("gpt-4o-transcribe") + audio + close },
      { form: model("gpt-4o-transcribe") + audio },
    ];
    for (const { form, contentType } of crafted) {
      const res = await upload(form, contentType);
      expect([400, 403]).toContain(res.status);
      expect((await res.json()).error.type).toMatch(/^(invalid_request_error|permission_error)$/);
    }
    expect(simulator.requests.length).toBe(before);
  });

  it("a call that names no model is checked and priced as the model the vendor runs for it", async () => {
    const { key, keyId, projectId } = await stack.newKey({ tier: "pro" });
    await credits.grant(projectId, 10_000_000, "test");
    await updateKey(stack.store, keyId, { models: ["dall-e-2"] }, []);
    await new Promise((resolve) => setTimeout(resolve, 250));
    const generate = (body: object, authorization = `Bearer ${key}`) =>
      fetch(`${stack.url}/openai/v1/images/generations`, {
        method: "POST",
        headers: { authorization, "content-type": "application/json" },
        body: JSON.stringify(body),
      });
    // Managed: priced at dall-e-2, OpenAI's default, rather than refused for a missing model.
    const managed = await generate({ prompt: "a lighthouse", size: "256x256" });
    expect(managed.status).toBe(200);
    await managed.arrayBuffer();
    expect(Number(managed.headers.get("x-dmt-cost-usd"))).toBeGreaterThan(0);
    // A parameter only gpt-image-1 takes makes OpenAI run it: outside this key's allowlist, in every mode.
    const before = simulator.requests.length;
    for (const authorization of [`Bearer ${key}`, `Bearer ${key};sk-callers-own-key-0123456789`]) {
      const refused = await generate({ prompt: "a lighthouse", output_format: "webp" }, authorization);
      expect(refused.status).toBe(403);
      expect(((await refused.json()) as { error: { code: string } }).error.code).toBe("model_not_allowed");
    }
    expect(simulator.requests.length).toBe(before);
    await updateKey(stack.store, keyId, { models: ["gpt-4o-mini"] }, []);
    await new Promise((resolve) => setTimeout(resolve, 250));
    const dual = await generate({ prompt: "a lighthouse" }, `Bearer ${key};sk-callers-own-key-0123456789`);
    expect(dual.status).toBe(403);
    expect(simulator.requests.length).toBe(before);
  });

  it("a key past its tokens per minute gets 429 with Retry-After", async () => {
    const { key, keyId, projectId } = await stack.newKey({ tier: "pro" });
    await credits.grant(projectId, 100 * hold, "test");
    await updateKey(stack.store, keyId, { tpm: 1000 }, []);
    await new Promise((resolve) => setTimeout(resolve, 250));
    const long = { ...body, messages: [{ role: "user", content: "sheep ".repeat(100) }] };
    const statuses: number[] = [];
    let limited: Awaited<ReturnType<typeof chat>> | undefined;
    // Each call is admitted with its estimated tokens (~250) and settled with its real usage.
    for (let i = 0; i < 30 && !limited; i++) {
      const r = await chat(key, {}, long);
      statuses.push(r.status);
      if (r.status === 429) limited = r;
      await stack.drain();
    }
    expect(statuses[0]).toBe(200);
    expect(limited?.json.error).toMatchObject({ type: "rate_limit_error", code: "rate_limit_exceeded" });
    expect(limited?.json.error.message).toContain("Tokens-per-minute limit of 1000");
    const retryAfter = Number(limited?.headers.get("retry-after"));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);

    // The minute's counter goes an hour after its minute (DynamoDB TTL): a past minute counts nothing.
    const { Items } = await stack.db.send(
      new ScanCommand({
        TableName: tableNames(process.env).budgetCounters,
        FilterExpression: "begins_with(counterId, :key)",
        ExpressionAttributeValues: marshall({ ":key": `tpm#${keyId}#t` }),
      }),
    );
    expect(Items?.length).toBeGreaterThan(0);
    for (const item of Items ?? []) {
      const { counterId: id, gcAt } = unmarshall(item) as { counterId: string; gcAt: number };
      // The minute follows the last "#t": a key id may begin with a "t" itself.
      const minute = Number(id.slice(id.lastIndexOf("#t") + 2));
      expect(gcAt).toBe((minute + 1) * 60 + 3600);
    }
  });
});

describe("GET /api/v1/budgets", () => {
  it("lists the budgets that apply to the calling key, with the current window's spend", async () => {
    const keyName = `batch "ünïcode" 🔑`;
    const { key, keyId, projectId } = await stack.newKey({ tier: "pro", name: keyName });
    const other = await stack.newKey({ projectId });
    await credits.grant(projectId, 100 * hold, "test");
    const now = Date.now();
    const mine = await setBudget(stack.store, budgets, { projectId, keyId, usd: "20", window: "day" }, now);
    await setBudget(stack.store, budgets, { projectId, keyId: other.keyId, usd: "5", window: "day" }, now);
    const monthly = await setBudget(stack.store, budgets, { projectId, usd: "500", window: "month" }, now);
    const answered = await chat(key);
    expect(answered.status).toBe(200);
    await stack.drain();

    const res = await fetch(`${stack.url}/api/v1/budgets`, { headers: { authorization: `Bearer ${key}` } });
    expect(res.status).toBe(200);
    const listed = (await res.json()) as {
      data: { id: string; spent_usd: string; held_usd: string; key?: string; key_name?: string }[];
    };
    expect(listed.data.map((b) => b.id).sort()).toEqual([mine.budgetId, monthly.budgetId].sort());
    // The key's budget names the key beside its id; the project's budget names no key.
    expect(listed.data.find((b) => b.id === mine.budgetId)).toMatchObject({ key: keyId, key_name: keyName });
    expect(listed.data.find((b) => b.id === monthly.budgetId)).not.toHaveProperty("key_name");
    for (const b of listed.data) {
      expect(b).toMatchObject({ spent_usd: usd(cost(answered.json.usage)), held_usd: "0.00" });
    }
    const bad = await fetch(`${stack.url}/api/v1/budgets?user=${"u".repeat(300)}`, {
      headers: { authorization: `Bearer ${key}` },
    });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { code: string } }).error.code).toBe("invalid_field");
  });
});

describe("budget holds a crash left open", () => {
  it("are settled by the sweeper at expiry, at the charges noted on them", async () => {
    const counter = `sweep-${Date.now()}#total`;
    const taken = await budgets.hold(counter, "hold-aaaaaaaa", 1_000, Date.now() + 50, 10_000);
    if (!taken.ok) throw new Error("the hold was refused");
    await budgets.recordCharges(taken.hold, { chargedMicros: 300, uncollectedMicros: 0, calls: 2 });
    expect(await budgets.spend(counter)).toEqual({ spentMicros: 300, heldMicros: 700 });
    // Not yet expired: left alone.
    expect((await budgets.releaseExpired(taken.hold.createdAt)).holdsSettled).toBe(0);
    expect((await budgets.releaseExpired(taken.hold.expiresAt)).holdsSettled).toBeGreaterThanOrEqual(1);
    expect(await budgets.spend(counter)).toEqual({ spentMicros: 300, heldMicros: 0 });
    // Exactly once: a second sweep or a late settlement finds no marker.
    await budgets.settleCharges(taken.hold, { chargedMicros: 900, uncollectedMicros: 0, calls: 3 });
    expect(await budgets.spend(counter)).toEqual({ spentMicros: 300, heldMicros: 0 });
    // The room came back: a hold of the whole limit less the spend fits, one micro more does not.
    expect((await budgets.hold(counter, "hold-bbbbbbbb", 9_701, Date.now() + 60_000, 10_000)).ok).toBe(false);
    expect((await budgets.hold(counter, "hold-cccccccc", 9_700, Date.now() + 60_000, 10_000)).ok).toBe(true);
  });
});
