import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { DynamoCredits } from "../../lambda/adapters/dynamodb/credits";
import { tableNames } from "../../lambda/adapters/dynamodb/tables";
import { createKey, createProject } from "../../lambda/core/accounts";
import { silentLogger } from "../../lambda/core/logger";
import type { RateLimit } from "../../lambda/core/model";
import { parseLocalConfig } from "../../lambda/local/config";
import { type EmbeddedDynamo, startEmbeddedDynamo } from "../../lambda/local/embedded-dynamo";
import { type EmbeddedHost, startEmbeddedHost } from "../../lambda/local/host";
import { type Simulator, startSimulator } from "../../lambda/local/simulator";
import { simulatorEnv } from "../support/host";

/**
 * Per-key rate limits through two server stacks that share one store (as two processes or two Lambda
 * instances would), on an injected clock: burst, refusal, refill, and the headers on every response.
 */
let simulator: Simulator;
let dynamo: EmbeddedDynamo;
const dirs: string[] = [];
let first: EmbeddedHost;
let second: EmbeddedHost;
let credits: DynamoCredits;
let now = Date.now();
const clock = () => now;

async function startStack(): Promise<EmbeddedHost> {
  const dir = mkdtempSync(join(tmpdir(), "dmt-rate-"));
  dirs.push(dir);
  const config = parseLocalConfig({
    PORT: "0",
    DMT_ACCESS_LOG: "off",
    DMT_DATA_DIR: dir,
    DMT_DYNAMODB_ENDPOINT: dynamo.endpoint,
    DMT_KEY_CACHE_MS: "60000",
    DMT_METERING: "on",
    ...simulatorEnv(simulator.origins),
  });
  return startEmbeddedHost(config, silentLogger, { clock });
}

beforeAll(async () => {
  simulator = await startSimulator();
  const storeDir = mkdtempSync(join(tmpdir(), "dmt-rate-store-"));
  dirs.push(storeDir);
  dynamo = await startEmbeddedDynamo(storeDir);
  first = await startStack();
  second = await startStack();
  credits = new DynamoCredits(first.db, tableNames(process.env), clock);
});
afterAll(async () => {
  await first.close();
  await second.close();
  await dynamo.close();
  await simulator.close();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});
beforeEach(() => simulator.reset());

let projects = 0;

async function keyWith(limit: RateLimit, usd = 1): Promise<{ key: string; projectId: string }> {
  const projectId = `r${process.pid}-${++projects}`;
  await createProject(first.store, projectId, "enterprise", Date.now());
  const { key } = await createKey(first.store, { projectId, name: "test", rateLimit: limit }, Date.now());
  if (usd > 0) await credits.grant(projectId, usd * 1_000_000, "test");
  return { key, projectId };
}

const chat = JSON.stringify({
  model: "gpt-4o-mini",
  messages: [{ role: "user", content: "hello" }],
  max_tokens: 16,
});

function call(stack: EmbeddedHost, key: string, path = "/openai/v1/chat/completions"): Promise<Response> {
  const get = path.startsWith("/api/") || path.endsWith("/health");
  return fetch(`${stack.url}${path}`, {
    method: get ? "GET" : "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    ...(get ? {} : { body: chat }),
  });
}

function limitHeaders(res: Response) {
  return {
    status: res.status,
    limit: res.headers.get("x-ratelimit-limit"),
    remaining: res.headers.get("x-ratelimit-remaining"),
    reset: res.headers.get("x-ratelimit-reset"),
    retryAfter: res.headers.get("retry-after"),
  };
}

describe("per-key rate limits", () => {
  it("allows the burst, refuses the next with 429 and Retry-After, then refills at rpm/60 a second", async () => {
    const { key, projectId } = await keyWith({ rpm: 60, burst: 3 });
    const start = now;
    const full = String(Math.ceil((start + 3000) / 1000));
    const seen = [];
    for (let i = 0; i < 4; i++) seen.push(limitHeaders(await call(first, key)));
    expect(seen).toEqual([
      {
        status: 200,
        limit: "60",
        remaining: "2",
        reset: String(Math.ceil((start + 1000) / 1000)),
        retryAfter: null,
      },
      {
        status: 200,
        limit: "60",
        remaining: "1",
        reset: String(Math.ceil((start + 2000) / 1000)),
        retryAfter: null,
      },
      { status: 200, limit: "60", remaining: "0", reset: full, retryAfter: null },
      { status: 429, limit: "60", remaining: "0", reset: full, retryAfter: "1" },
    ]);
    const refused = await call(first, key);
    expect(await refused.json()).toEqual({
      error: {
        type: "rate_limit_error",
        code: "rate_limit_exceeded",
        message: "Rate limit exceeded; retry after 1 s.",
      },
    });
    // Refused calls were neither forwarded nor charged.
    expect(simulator.requests).toHaveLength(3);
    await first.drain();
    // Only the calls let through were held and charged.
    const ledger = (await credits.ledger(projectId, { limit: 100 })).entries;
    expect(ledger.filter((e) => e.type === "settle").reduce((sum, e) => sum + (e.calls ?? 0), 0)).toBe(3);

    now += 999;
    expect((await call(first, key)).status).toBe(429);
    now += 1;
    expect(limitHeaders(await call(first, key))).toMatchObject({ status: 200, remaining: "0" });
    expect((await call(first, key)).status).toBe(429);
    now += 3000;
    const refilled = [];
    for (let i = 0; i < 4; i++) refilled.push((await call(first, key)).status);
    expect(refilled).toEqual([200, 200, 200, 429]);
  });

  it("puts the headers on every response after authentication: 200, 402, 404, 429, health, the data API", async () => {
    const { key } = await keyWith({ rpm: 120, burst: 6 }, 0);
    const responses = [
      await call(first, key, "/api/v1/status"),
      await call(first, key), // no credits: 402
      await call(first, key, "/openai/v1/no-such-route"),
      await call(first, key, "/openai/health"),
      await call(first, key, "/gemini/v1beta/models/gemini-unknown:generateContent"),
      await call(first, key, "/api/v1/status"),
      await call(first, key), // the 7th: over the burst of 6
      await call(first, key, "/api/v1/status"),
    ];
    expect(responses.map((r) => r.status)).toEqual([200, 402, 404, 200, 404, 200, 429, 429]);
    responses.forEach((res, i) => {
      expect(res.headers.get("x-ratelimit-limit"), `response ${i}`).toBe("120");
      expect(res.headers.get("x-ratelimit-remaining"), `response ${i}`).toBe(String(Math.max(0, 5 - i)));
      expect(Number(res.headers.get("x-ratelimit-reset")), `response ${i}`).toBeGreaterThan(now / 1000);
      expect(res.headers.get("retry-after") !== null, `response ${i}`).toBe(res.status === 429);
    });
    expect(simulator.requests).toEqual([]);
  });

  it("shares one limit between two servers on one store", async () => {
    const { key } = await keyWith({ rpm: 60, burst: 4 });
    const statuses = [];
    for (const stack of [first, second, first, second, first, second])
      statuses.push((await call(stack, key)).status);
    expect(statuses).toEqual([200, 200, 200, 200, 429, 429]);
    now += 1000;
    expect((await call(second, key)).status).toBe(200);
    expect((await call(first, key)).status).toBe(429);
    expect(simulator.requests).toHaveLength(5);
  });

  it("limits each key on its own", async () => {
    const a = await keyWith({ rpm: 60, burst: 1 });
    const b = await keyWith({ rpm: 60, burst: 1 });
    expect((await call(first, a.key)).status).toBe(200);
    expect((await call(first, a.key)).status).toBe(429);
    expect((await call(second, b.key)).status).toBe(200);
  });
});
