import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoBudgets } from "../../lambda/adapters/dynamodb/budgets";
import { DynamoCredits } from "../../lambda/adapters/dynamodb/credits";
import { TRANSACTION_ID_HEADER } from "../../lambda/app/proxy/app";
import { createKey, createProject } from "../../lambda/core/accounts";
import { type Budget, counterId, setBudget, windowSpan } from "../../lambda/core/budgets";
import { type Simulator, startSimulator } from "../../lambda/local/simulator";
import { type LocalStore, openLocalStore } from "../../lambda/local/store";
import { type ServeProcess, startDmtServe } from "../support/cli";
import { simulatorEnv } from "../support/host";
import { allLedgerEntries, tally, unresolvedOrDoubled, until, warehouseRows } from "../support/reliability";

/**
 * A server killed with SIGKILL while calls stream and while records wait to be written, then started
 * again on the same data dir: the credit lease the calls in flight hold is settled by the sweeper at the
 * charges noted before the crash (those of the calls that finished), and so are the budget windows'
 * holds; nothing is charged twice, and every record of a call that finished is written exactly once,
 * including the ones only the queue's journal still held and a batch the consumer had half written
 * (docs/reliability.md).
 */
const GRANT = 5_000_000;
const COMPLETED = 4;
const IN_FLIGHT = 3;
/** Two server starts and a sweep: more than the default timeout on a loaded machine. */
const TEST_TIMEOUT_MS = 120_000;
let sim: Simulator;
let dataDir: string;
const servers: ServeProcess[] = [];
const stores: LocalStore[] = [];
const saved = { ...process.env };

beforeAll(async () => {
  sim = await startSimulator({ chunkDelayMs: 300 });
  dataDir = mkdtempSync(join(tmpdir(), "dmt-sigkill-"));
  // `dmt serve` children take their configuration from this process's environment.
  Object.assign(process.env, simulatorEnv(sim.origins), {
    DMT_METERING: "on",
    DMT_HOLD_TTL_MS: "1000",
    DMT_SWEEP_INTERVAL_MS: "3600000",
    DMT_WAREHOUSE_FLUSH_MS: "200",
  });
});
afterAll(async () => {
  for (const store of stores) await store.close();
  for (const server of servers) if (server.child.exitCode === null) await server.stop("SIGKILL");
  await sim?.close();
  process.env = saved;
  rmSync(dataDir, { recursive: true, force: true });
});

async function serve(): Promise<ServeProcess> {
  const server = await startDmtServe(dataDir);
  servers.push(server);
  return server;
}

/** The running server's store, through the endpoint it published. */
async function store(): Promise<LocalStore> {
  const local = await openLocalStore(dataDir);
  stores.push(local);
  return local;
}

function chat(url: string, key: string, stream: boolean): Promise<Response> {
  return fetch(`${url}/openai/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({
      model: "gpt-4o-mini",
      messages: [{ role: "user", content: "one two three four five six seven eight nine ten" }],
      max_tokens: 100,
      stream,
    }),
  });
}

/** Transaction ids of the records waiting in the queue's journal. */
function journaled(): string[] {
  const dir = join(dataDir, "warehouse-queue");
  return readdirSync(dir).flatMap((name) =>
    readFileSync(join(dir, name), "utf8")
      .split("\n")
      .filter(Boolean)
      .map((line) => (JSON.parse(line) as { transaction_id: string }).transaction_id),
  );
}

describe("SIGKILL with calls in flight, then a restart", () => {
  it(
    "settles the credit lease and budget holds of the calls in flight at the charges noted, charges nothing twice, and writes every finished call's record once",
    async () => {
      const first = await serve();
      const local = await store();
      const credits = new DynamoCredits(local.db, local.tables);
      const keys: Record<string, string> = {};
      // Each project has a budget per window that its calls never reach, to count against.
      const budgets = new DynamoBudgets(local.db, local.tables);
      const windows: Record<string, Budget[]> = {};
      for (const projectId of ["crash-a", "crash-b"]) {
        await createProject(local.store, projectId, "pro", Date.now());
        keys[projectId] = (await createKey(local.store, { projectId, name: "test" }, Date.now())).key;
        await credits.grant(projectId, GRANT, "test");
        windows[projectId] = await Promise.all(
          ["day", "month", "total"].map((window) =>
            setBudget(local.store, budgets, { projectId, usd: "1000", window }, Date.now()),
          ),
        );
      }
      /** Each budget's current window: what it spent and what it still holds. */
      const windowSpends = (counters: DynamoBudgets, projectId: string) =>
        Promise.all(
          (windows[projectId] ?? []).map((budget) =>
            counters.spend(counterId(budget, windowSpan(budget.window, Date.now()), null)),
          ),
        );
      // Project B's partition cannot be written: its records stay in the queue (and its journal).
      const blocked = join(dataDir, "warehouse", "interactions", "project=crash-b");
      mkdirSync(join(blocked, ".."), { recursive: true });
      writeFileSync(blocked, "");

      const costs: Record<string, number> = {};
      const finished = async (projectId: string) => {
        const ids: string[] = [];
        for (let i = 0; i < COMPLETED; i++) {
          const res = await chat(first.url, keys[projectId] as string, false);
          expect(res.status).toBe(200);
          const { usage } = await res.json();
          // gpt-4o-mini: 0.15 and 0.60 USD per million input and output tokens.
          const cost = Math.ceil((usage.prompt_tokens * 150 + usage.completion_tokens * 600) / 1000);
          costs[projectId] = (costs[projectId] ?? 0) + cost;
          ids.push(res.headers.get(TRANSACTION_ID_HEADER) as string);
        }
        return ids.sort();
      };
      const idsA = await finished("crash-a");
      const idsB = await finished("crash-b");
      // The finished calls' charges are on the store (noted within a second): a crash loses none of them.
      for (const projectId of ["crash-a", "crash-b"]) {
        await until(async () => {
          const { availableMicros, heldMicros } = await credits.balance(projectId);
          return GRANT - availableMicros - heldMicros === costs[projectId] || undefined;
        });
      }
      // A's records are written; B's wait in the journal, the consumer having written A's half of a batch.
      await until(async () => {
        const rows = await warehouseRows(dataDir);
        return rows.filter((r) => r.project_id === "crash-a").length === COMPLETED || undefined;
      });
      await until(() => idsB.every((id) => journaled().includes(id)) || undefined);

      // Streams in flight: each has its hold and has sent its first bytes.
      const readers = await Promise.all(
        Array.from({ length: IN_FLIGHT }, async () => {
          const res = await chat(first.url, keys["crash-a"] as string, true);
          const reader = res.body?.getReader();
          expect((await reader?.read())?.done).toBe(false);
          return reader;
        }),
      );
      expect((await credits.balance("crash-a")).openHolds).toBeGreaterThanOrEqual(1);

      expect(await first.stop("SIGKILL")).toBeNull();
      for (const reader of readers) await reader?.read().catch(() => undefined);
      // Only the journal holds B's records now.
      expect(idsB.every((id) => journaled().includes(id))).toBe(true);
      expect((await warehouseRows(dataDir)).filter((r) => r.project_id === "crash-b")).toEqual([]);

      rmSync(blocked);
      process.env.DMT_SWEEP_INTERVAL_MS = "100";
      const second = await serve();
      const restarted = await store();
      const after = new DynamoCredits(restarted.db, local.tables);
      const afterBudgets = new DynamoBudgets(restarted.db, local.tables);
      // The sweeper settles A's lease of the calls in flight, and B's too should the kill have come
      // before B's idle lease settled (its ledger entries are written only then); one project's shard
      // may be swept before the other's.
      for (const projectId of ["crash-a", "crash-b"]) {
        await until(async () => ((await after.balance(projectId)).openHolds === 0 ? true : undefined));
        // The budget windows' holds are swept too.
        await until(async () => {
          const spends = await windowSpends(afterBudgets, projectId);
          return spends.every((spend) => spend.heldMicros === 0) || undefined;
        });
      }
      const rows = await until(async () => {
        const all = await warehouseRows(dataDir);
        return all.some((r) => r.project_id === "crash-b") ? all : undefined;
      });

      // Every finished call's record once; the calls cut by the kill left none (they never finished).
      expect(rows.map((r) => r.transaction_id).sort()).toEqual([...idsA, ...idsB].sort());
      for (const [projectId, ids] of [
        ["crash-a", idsA],
        ["crash-b", idsB],
      ] as const) {
        const entries = await allLedgerEntries(after, projectId);
        const projectRows = rows.filter((r) => r.project_id === projectId);
        expect(projectRows.map((r) => r.transaction_id).sort()).toEqual(ids);
        const cost = projectRows.reduce((sum, r) => sum + (r.cost_micros ?? 0), 0);
        expect(cost).toBe(costs[projectId]);
        // Every hold (credit lease) resolved once; the settlements charged the finished calls, once each.
        expect(unresolvedOrDoubled(entries)).toEqual([]);
        const settled = entries.filter((e) => e.type === "settle");
        expect(settled.reduce((sum, e) => sum + (e.chargedMicros ?? 0), 0)).toBe(cost);
        expect(settled.reduce((sum, e) => sum + (e.calls ?? 0), 0)).toBe(COMPLETED);
        expect(tally(entries, (e) => e.type).grant).toBe(1);
        expect(await after.balance(projectId)).toEqual({
          projectId,
          availableMicros: GRANT - cost,
          heldMicros: 0,
          chargedInFlightMicros: 0,
          openHolds: 0,
        });
        // Each budget window spent exactly its records' costs, and holds nothing.
        expect(await windowSpends(afterBudgets, projectId)).toEqual(
          (windows[projectId] ?? []).map(() => ({ spentMicros: cost, heldMicros: 0 })),
        );
      }
      // The journal empties once its records are written, and a clean stop leaves no file in it.
      await until(() => (journaled().length === 0 ? true : undefined));
      expect(await second.stop("SIGINT")).toBe(0);
      expect(readdirSync(join(dataDir, "warehouse-queue"))).toEqual([]);
    },
    TEST_TIMEOUT_MS,
  );
});
