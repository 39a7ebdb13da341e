import { randomBytes } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoCredits } from "../../lambda/adapters/dynamodb/credits";
import { DynamoInteractionIndex } from "../../lambda/adapters/dynamodb/interactions";
import { DynamoPrivacySettings } from "../../lambda/adapters/dynamodb/privacy-settings";
import { tableNames } from "../../lambda/adapters/dynamodb/tables";
import { localUserIdHasher } from "../../lambda/adapters/fs/master-key";
import { createKey, createProject } from "../../lambda/core/accounts";
import { jsonLogger } from "../../lambda/core/logger";
import { type StoreLevel, updatePrivacySettings } from "../../lambda/core/privacy";
import { parseLocalConfig } from "../../lambda/local/config";
import { type EmbeddedHost, startEmbeddedHost } from "../../lambda/local/host";

/**
 * The guarantee of levels `metadata` and `none`: no byte of a request or response body reaches the
 * warehouse, the dashboard index, the queue's journal, logs or exports. Each call carries a canary
 * (a random string the simulator echoes into its answer); after the calls are written, every file of
 * the data dir, every log line, the index entry and an export are searched for it. The same calls at
 * `full` find it, so the search can fail.
 */
let dataDir: string;
let stack: EmbeddedHost;
const logLines: string[] = [];
const names = tableNames(process.env);

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), "dmt-privacy-"));
  const config = parseLocalConfig({
    PORT: "0",
    DMT_ACCESS_LOG: "off",
    DMT_DATA_DIR: dataDir,
    DMT_KEY_CACHE_MS: "0",
    DMT_METERING: "on",
    DMT_WAREHOUSE_FLUSH_MS: "100",
  });
  stack = await startEmbeddedHost(
    config,
    jsonLogger("debug", (line) => void logLines.push(line)),
  );
});
afterAll(async () => {
  await stack?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

/** Files that vanish while being listed (the journal's, once delivered) hold nothing any more. */
function gone(err: unknown): boolean {
  return (err as NodeJS.ErrnoException).code === "ENOENT";
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    try {
      return statSync(path).isDirectory() ? filesUnder(path) : [path];
    } catch (err) {
      if (gone(err)) return [];
      throw err;
    }
  });
}

function holds(path: string, bytes: Buffer): boolean {
  try {
    return readFileSync(path).includes(bytes);
  } catch (err) {
    if (gone(err)) return false;
    throw err;
  }
}

/** The files of the data dir holding `needle` (the store, the warehouse, the journal, dead letters...). */
function filesHolding(needle: string): string[] {
  const bytes = Buffer.from(needle, "utf8");
  return filesUnder(dataDir).filter((path) => holds(path, bytes));
}

let projectCount = 0;

/** A project at `store`, with credits and a key (itself held to `keyStore`, when given). */
async function projectAt(store: StoreLevel, keyStore?: "metadata" | "none") {
  const projectId = `priv-${++projectCount}-${process.pid}`;
  await createProject(stack.store, projectId, "pro", Date.now());
  await updatePrivacySettings(stack.store, new DynamoPrivacySettings(stack.db, names), projectId, { store });
  await new DynamoCredits(stack.db, names).grant(projectId, 5_000_000, "test");
  const { key } = await createKey(
    stack.store,
    { projectId, name: "privacy", ...(keyStore && { store: keyStore }) },
    Date.now(),
  );
  return { projectId, key };
}

const canary = () => `canary${randomBytes(12).toString("hex")}`;

/** An OpenAI chat, a stream and an Anthropic message, each carrying `mark`; the transaction ids. */
async function callsCarrying(key: string, mark: string, user: string, headers: Record<string, string> = {}) {
  const ids: string[] = [];
  const note = (response: Response) => ids.push(response.headers.get("x-dmt-transaction-id") ?? "");
  const openai = new OpenAI({
    apiKey: key,
    baseURL: `${stack.url}/openai/v1`,
    defaultHeaders: headers,
  });
  const { data: chat, response: answered } = await openai.chat.completions
    .create({
      model: "gpt-4o-mini",
      messages: [{ role: "user", content: `repeat ${mark}` }],
      user,
    })
    .withResponse();
  note(answered);
  expect(chat.choices[0]?.message.content).toContain(mark);
  const { data: stream, response: streaming } = await openai.chat.completions
    .create({ model: "gpt-4o-mini", messages: [{ role: "user", content: `stream ${mark}` }], stream: true })
    .withResponse();
  note(streaming);
  let streamed = "";
  for await (const chunk of stream) streamed += chunk.choices[0]?.delta.content ?? "";
  expect(streamed).toContain(mark);
  const anthropic = new Anthropic({
    apiKey: key,
    baseURL: `${stack.url}/anthropic`,
    defaultHeaders: headers,
  });
  const { data: message, response } = await anthropic.messages
    .create({
      model: "claude-haiku-4-5",
      max_tokens: 64,
      messages: [{ role: "user", content: `say ${mark}` }],
      metadata: { user_id: user },
    })
    .withResponse();
  note(response);
  expect(JSON.stringify(message.content)).toContain(mark);
  await stack.drain();
  return ids;
}

async function exported(key: string): Promise<string> {
  const today = new Date().toISOString().slice(0, 10);
  const res = await fetch(`${stack.url}/api/v1/exports`, {
    method: "POST",
    headers: { Authorization: `Bearer ${key}` },
    body: JSON.stringify({ format: "json", range: { start: today, end: today } }),
  });
  expect(res.status).toBe(200);
  return res.text();
}

async function indexed(projectId: string, ids: string[]) {
  const index = new DynamoInteractionIndex(stack.db, names);
  return Promise.all(ids.map((id) => index.get(projectId, id)));
}

describe("store levels on the whole record path", () => {
  it("at full, the canary is in the warehouse, the index and the export (the search works)", async () => {
    const { projectId, key } = await projectAt("full");
    const mark = canary();
    const ids = await callsCarrying(key, mark, "someone");
    expect(filesHolding(mark).some((f) => f.endsWith(".parquet"))).toBe(true);
    expect(await exported(key)).toContain(mark);
    const entries = await indexed(projectId, ids);
    expect(entries.every((e) => e?.store_level === "full" && e.request_body?.includes(mark))).toBe(true);
  });

  it.each([
    ["the project is at metadata", "metadata", undefined, {}],
    ["the project is at none", "none", undefined, {}],
    ["the key is held to metadata", "full", "metadata", {}],
    ["the request asks for metadata", "full", undefined, { "X-DMT-Store": "metadata" }],
    ["the request asks for none", "full", undefined, { "X-DMT-Store": "none" }],
  ] as const)("when %s, no byte of a body is kept anywhere", async (_, store, keyStore, headers) => {
    const { projectId, key } = await projectAt(store, keyStore);
    const balanceBefore = await new DynamoCredits(stack.db, names).balance(projectId);
    const mark = canary();
    const user = `ada-${randomBytes(6).toString("hex")}`;
    const ids = await callsCarrying(key, mark, user, headers);
    expect(ids, JSON.stringify(ids)).toHaveLength(3);

    expect(filesHolding(mark)).toEqual([]);
    expect(logLines.filter((line) => line.includes(mark))).toEqual([]);
    const text = await exported(key);
    expect(text).not.toContain(mark);

    const level =
      store === "none" || (headers as Record<string, string>)["X-DMT-Store"] === "none" ? "none" : "metadata";
    const rows = JSON.parse(text) as Record<string, unknown>[];
    expect(rows).toHaveLength(3);
    const entries = await indexed(projectId, ids);
    for (const row of [...rows, ...entries]) {
      expect(row).toMatchObject({ store_level: level, request_body: null, response_body: null });
      // What billing and usage need is all there.
      expect(row?.input_tokens).toBeGreaterThan(0);
      expect(row?.output_tokens).toBeGreaterThan(0);
      expect(row?.cost_micros).toBeGreaterThan(0);
      expect(row?.request_bytes).toBeGreaterThan(0);
    }
    const users = rows.map((r) => r.user_id).filter((u) => u !== null);
    const keyed = await localUserIdHasher(dataDir).keyed(projectId, user);
    expect(users).toEqual(level === "none" ? [keyed, keyed] : [user, user]);
    if (level === "none") expect(filesHolding(user)).toEqual([]);

    // Billing kept working: the credits paid exactly what the records say.
    const balanceAfter = await new DynamoCredits(stack.db, names).balance(projectId);
    const charged = rows.reduce((sum, r) => sum + (r.cost_micros as number), 0);
    expect(balanceBefore.availableMicros - balanceAfter.availableMicros).toBe(charged);
  });

  it("refuses X-DMT-Store asking for more than the project keeps, forwarding nothing and keeping no body", async () => {
    const { key } = await projectAt("metadata");
    const mark = canary();
    for (const asked of ["full", "everything"]) {
      const res = await fetch(`${stack.url}/openai/v1/chat/completions`, {
        method: "POST",
        headers: { Authorization: `Bearer ${key}`, "X-DMT-Store": asked },
        body: JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "user", content: mark }] }),
      });
      expect(res.status).toBe(400);
      const body = (await res.json()) as { error: { type: string; code: string; message: string } };
      expect(body.error).toMatchObject({ type: "invalid_request_error", code: "invalid_header" });
      expect(body.error.message).toContain("X-DMT-Store");
    }
    await stack.drain();
    expect(filesHolding(mark)).toEqual([]);
    expect(await exported(key)).not.toContain(mark);
  });
});
