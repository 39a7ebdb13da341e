import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoCredits } from "../../lambda/adapters/dynamodb/credits";
import { tableNames } from "../../lambda/adapters/dynamodb/tables";
import { activePriceCatalogue } from "../../lambda/adapters/fs/price-catalogue";
import { costMicros } from "../../lambda/core/pricing";
import { type Simulator, startSimulator } from "../../lambda/local/simulator";
import { simulatorEnv, startTestHost, type TestHost, testVendorKey } from "../support/host";

/**
 * The whole path: official SDK -> proxy (metering on) -> queue -> consumer -> Parquet -> export.
 */
let sim: Simulator;
let stack: TestHost;
let key: string;
let projectId: string;

function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? filesUnder(path) : [path];
  });
}

async function exportRows(body: Record<string, unknown>): Promise<Record<string, unknown>[]> {
  const res = await fetch(`${stack.url}/api/v1/exports`, {
    method: "POST",
    headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  expect(res.status).toBe(200);
  return (await res.json()) as Record<string, unknown>[];
}

const today = () => new Date().toISOString().slice(0, 10);

beforeAll(async () => {
  sim = await startSimulator();
  stack = await startTestHost({
    ...simulatorEnv(sim.origins),
    DMT_METERING: "on",
    DMT_WAREHOUSE_FLUSH_MS: "100",
  });
  ({ key, projectId } = await stack.newKey({ tier: "pro" }));
  await new DynamoCredits(stack.db, tableNames(process.env)).grant(projectId, 5_000_000, "test");
});
afterAll(async () => {
  await stack.stop();
  await sim.close();
});

describe("interaction records through the official SDKs", () => {
  it("stores each call once with exact tokens, cost, billing mode, user id and bodies, and no secret", async () => {
    const openai = new OpenAI({ apiKey: key, baseURL: `${stack.url}/openai/v1` });
    const chat = await openai.chat.completions.create({
      model: "gpt-4o-mini",
      messages: [{ role: "user", content: "count the apples, please" }],
      user: "u-alice",
    });
    const stream = await openai.chat.completions.create({
      model: "gpt-4o-mini",
      messages: [{ role: "user", content: "stream some words" }],
      stream: true,
    });
    let streamed = "";
    for await (const chunk of stream) streamed += chunk.choices[0]?.delta.content ?? "";

    const vendorKey = "sk-ant-dual-0123456789abcdef";
    const anthropic = new Anthropic({ apiKey: `${key};${vendorKey}`, baseURL: `${stack.url}/anthropic` });
    const message = await anthropic.messages.create(
      {
        model: "claude-haiku-4-5",
        max_tokens: 64,
        messages: [{ role: "user", content: "hello there" }],
        metadata: { user_id: "u-bob" },
      },
      { headers: { "X-Request-ID": "req-e2e-1" } },
    );

    await stack.drain();
    const rows = await exportRows({ format: "json", range: { start: today(), end: today() } });
    expect(rows).toHaveLength(3);

    const prices = activePriceCatalogue({});
    const byModel = (model: string, isStream: boolean) =>
      rows.find((r) => r.model === model && r.streamed === isStream) as Record<string, unknown>;

    const plain = byModel("gpt-4o-mini", false);
    const price = prices.priceFor("openai", "gpt-4o-mini", new Date());
    if (!price) throw new Error("gpt-4o-mini has no price");
    expect(plain).toMatchObject({
      project_id: projectId,
      vendor: "openai",
      endpoint: "/v1/chat/completions",
      billing_mode: "managed",
      status_code: 200,
      user_id: "u-alice",
      input_tokens: chat.usage?.prompt_tokens,
      output_tokens: chat.usage?.completion_tokens,
      price_version: prices.priceVersion,
    });
    const usage = {
      inputTokens: chat.usage?.prompt_tokens ?? 0,
      outputTokens: chat.usage?.completion_tokens ?? 0,
      cachedInputTokens: 0,
      cacheWriteTokens: 0,
      reasoningTokens: 0,
      estimated: false,
      complete: true,
    };
    expect(plain.cost_micros).toBe(costMicros(usage, price));
    expect(String(plain.response_body)).toContain(chat.choices[0]?.message.content ?? "<none>");

    const streamRow = byModel("gpt-4o-mini", true);
    expect(streamRow.response_body).toContain(streamed);
    expect(Number(streamRow.output_tokens)).toBeGreaterThan(0);

    const dual = byModel("claude-haiku-4-5", false);
    expect(dual).toMatchObject({
      vendor: "anthropic",
      billing_mode: "dual",
      user_id: "u-bob",
      request_id: "req-e2e-1",
      input_tokens: message.usage.input_tokens,
      output_tokens: message.usage.output_tokens,
    });

    // No secret anywhere in what the warehouse wrote: the service key, its secret part, the vendor keys.
    const secrets = [
      key,
      key.split("_")[2] ?? key,
      vendorKey,
      testVendorKey("openai"),
      testVendorKey("anthropic"),
    ];
    const files = filesUnder(join(stack.dataDir, "warehouse"));
    expect(files.some((f) => f.endsWith(".parquet"))).toBe(true);
    for (const file of files) {
      const bytes = readFileSync(file);
      for (const secret of secrets) expect(bytes.includes(secret)).toBe(false);
    }
  });

  it("records our own refusals after authentication, and a key of another project sees none of these rows", async () => {
    const openai = new OpenAI({ apiKey: key, baseURL: `${stack.url}/openai/v1`, maxRetries: 0 });
    await expect(
      openai.chat.completions.create({ model: "no-such-model", messages: [{ role: "user", content: "x" }] }),
    ).rejects.toMatchObject({ status: 404 });
    await stack.drain();
    const rows = await exportRows({
      format: "json",
      range: { start: today(), end: today() },
      filters: { model: "no-such-model" },
    });
    expect(rows).toEqual([expect.objectContaining({ status_code: 404, error_type: "not_found_error" })]);

    const other = await stack.newKey();
    const res = await fetch(`${stack.url}/api/v1/exports`, {
      method: "POST",
      headers: { Authorization: `Bearer ${other.key}` },
      body: JSON.stringify({ format: "csv", range: { start: today(), end: today() } }),
    });
    expect(res.status).toBe(200);
    const csv = await res.text();
    expect(csv.trim().split("\n")).toHaveLength(1); // the header row only
  });
});

describe("vendor errors that echo credentials", () => {
  it("keeps neither the vendor key in use nor a service key in the stored bodies", async () => {
    const dualKey = "sk-dual-echoed-0123456789abcdef";
    const managedKey = testVendorKey("openai");
    // Vendors do echo what they received in auth errors ("Incorrect API key provided: sk-...").
    const echo = (vendorKey: string) => ({
      error: {
        message: `Incorrect API key provided: ${vendorKey}. Request had x-api-key ${key}.`,
        type: "invalid_request_error",
        code: "invalid_api_key",
      },
    });
    sim.inject({ vendor: "openai", fault: { kind: "status", status: 401, body: echo(dualKey) } });
    sim.inject({ vendor: "openai", fault: { kind: "status", status: 400, body: echo(managedKey) } });
    const transactionIds: string[] = [];
    for (const apiKey of [`${key};${dualKey}`, key]) {
      const openai = new OpenAI({ apiKey, baseURL: `${stack.url}/openai/v1`, maxRetries: 0 });
      const failure = await openai.chat.completions
        .create({ model: "gpt-4o-mini", messages: [{ role: "user", content: `echo ${key}` }] })
        .catch((err: unknown) => err);
      expect(failure).toBeInstanceOf(OpenAI.APIError);
      transactionIds.push(
        (failure as InstanceType<typeof OpenAI.APIError>).headers?.get("x-dmt-transaction-id") ?? "",
      );
    }
    await stack.drain();
    const rows = await exportRows({ format: "json", range: { start: today(), end: today() } });
    for (const id of transactionIds) {
      const row = rows.find((r) => r.transaction_id === id);
      expect(row?.status_code).toBeGreaterThanOrEqual(400);
      const stored = `${row?.request_body} ${row?.response_body}`;
      expect(stored).toContain("Incorrect API key provided: [redacted]");
      for (const secret of [dualKey, managedKey, key, key.split("_")[2] ?? key]) {
        expect(stored.includes(secret)).toBe(false);
      }
    }
  });
});
