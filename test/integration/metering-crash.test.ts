import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoCredits } from "../../lambda/adapters/dynamodb/credits";
import { createKey, createProject } from "../../lambda/core/accounts";
import { type Simulator, startSimulator } from "../../lambda/local/simulator";
import { type LocalStore, openLocalStore } from "../../lambda/local/store";
import { type ServeProcess, startDmtServe } from "../support/cli";
import { simulatorEnv } from "../support/host";

/**
 * A server killed between a hold and its settlement (SIGKILL in the middle of a stream) leaves the hold
 * (its credit lease) open; the sweeper of the restarted server settles it once it expired: at the
 * charges of the calls that finished and were noted before the crash, releasing the rest.
 */
let simulator: Simulator;
let dataDir: string;
const servers: ServeProcess[] = [];
const stores: LocalStore[] = [];
const saved = { ...process.env };

beforeAll(async () => {
  simulator = await startSimulator({ chunkDelayMs: 300 });
  dataDir = mkdtempSync(join(tmpdir(), "dmt-crash-"));
  // `dmt serve` children take their configuration from this process's environment.
  Object.assign(process.env, simulatorEnv(simulator.origins), {
    DMT_METERING: "on",
    DMT_HOLD_TTL_MS: "1000",
    DMT_SWEEP_INTERVAL_MS: "3600000",
  });
});
afterAll(async () => {
  for (const store of stores) await store.close();
  for (const server of servers) if (server.child.exitCode === null) await server.stop("SIGKILL");
  await simulator.close();
  process.env = saved;
  rmSync(dataDir, { recursive: true, force: true });
});

async function serve(): Promise<ServeProcess> {
  const server = await startDmtServe(dataDir);
  servers.push(server);
  return server;
}

/** The store of the server running now, through the endpoint it published. */
async function store(): Promise<LocalStore> {
  const local = await openLocalStore(dataDir);
  stores.push(local);
  return local;
}

describe("a crash between a hold and its settlement", () => {
  it("leaves the lease to the sweeper, which settles it at its noted charges after a restart", async () => {
    const crashing = await serve();
    const local = await store();
    await createProject(local.store, "crash", "pro", Date.now());
    const { key } = await createKey(local.store, { projectId: "crash", name: "test" }, Date.now());
    const credits = new DynamoCredits(local.db, local.tables);
    await credits.grant("crash", 1_000_000, "test");

    const call = (body: Record<string, unknown>) =>
      fetch(`${crashing.url}/openai/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "gpt-4o-mini", max_tokens: 100, ...body }),
      });
    // A call in the middle of its stream when the server dies...
    const res = await call({
      messages: [{ role: "user", content: "one two three four five six seven eight nine ten" }],
      stream: true,
    });
    const reader = res.body?.getReader();
    expect((await reader?.read())?.done).toBe(false);
    // ...and one that finished meanwhile, under the same lease: its charge is noted within a second.
    const finished = await call({ messages: [{ role: "user", content: "one two three" }] });
    const { usage } = await finished.json();
    const cost = Math.ceil((usage.prompt_tokens * 150 + usage.completion_tokens * 600) / 1000);
    let noted = await credits.balance("crash");
    while (noted.availableMicros + noted.heldMicros === 1_000_000) {
      await sleep(50);
      noted = await credits.balance("crash");
    }
    expect(noted).toMatchObject({ openHolds: 1, availableMicros: 1_000_000 - cost - noted.heldMicros });

    expect(await crashing.stop("SIGKILL")).toBeNull();
    await reader?.read().catch(() => undefined);
    process.env.DMT_SWEEP_INTERVAL_MS = "100";
    await serve();
    const restarted = new DynamoCredits((await store()).db, local.tables);
    // The sweeper runs every 100 ms: wait for it to find the lease expired and settle it.
    let balance = await restarted.balance("crash");
    while (balance.openHolds > 0) {
      await sleep(50);
      balance = await restarted.balance("crash");
    }
    expect(balance).toEqual({
      projectId: "crash",
      availableMicros: 1_000_000 - cost,
      heldMicros: 0,
      chargedInFlightMicros: 0,
      openHolds: 0,
    });
    const entries = (await restarted.ledger("crash")).entries;
    expect(entries.map((e) => e.type)).toEqual(["settle", "hold", "grant"]);
    expect(entries[0]).toMatchObject({ chargedMicros: cost, calls: 1 });
    expect(entries.reduce((sum, e) => sum + e.deltaMicros, 0)).toBe(1_000_000 - cost);
  });
});
