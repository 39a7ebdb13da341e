/**
 * Helpers of the reliability suite (test/reliability) and of bench/reconcile.ts and bench/soak.ts:
 * fault injection at the store client, counting what clients were answered, and reading back what the
 * service wrote (warehouse rows, ledger entries) by means that do not go through the code under test.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import {
  type DynamoDBClient,
  InternalServerError,
  ProvisionedThroughputExceededException,
} from "@aws-sdk/client-dynamodb";
import { DuckDBInstance } from "@duckdb/node-api";
import type { DynamoCredits } from "../../lambda/adapters/dynamodb/credits";
import { tableNames } from "../../lambda/adapters/dynamodb/tables";
import { TRANSACTION_ID_HEADER } from "../../lambda/app/proxy/app";
import type { LedgerEntry } from "../../lambda/core/credits";
import { REPLAY_HEADER } from "../../lambda/core/idempotency";

/** What a store command looks like to a fault rule: its name (`UpdateItemCommand`) and input. */
export interface StoreCommand {
  name: string;
  input: Record<string, unknown>;
}

/**
 * - `throttle`: DynamoDB refuses the command (ProvisionedThroughputExceededException) before it applies.
 * - `error`: the store fails it with a 500 (InternalServerError) before it applies.
 * - `lostAnswer`: the command applies, then its answer is lost (a timeout), as on a dropped connection.
 * Each is thrown inside the SDK's retry loop, so the SDK retries it as it would the real thing.
 */
export type StoreFaultKind = "throttle" | "error" | "lostAnswer";

export interface StoreFaultRule {
  kind: StoreFaultKind;
  match(command: StoreCommand): boolean;
  /** How many matching attempts fail (default: all of them, until cleared). */
  times?: number;
}

export interface StoreFaults {
  add(rule: StoreFaultRule): void;
  clear(): void;
  /** Attempts failed so far. */
  readonly injected: number;
}

/** Commands of the credit protocol (lambda/adapters/dynamodb/credits.ts), by their role. */
export const creditCommands = {
  /** t1 (hold-items.ts): the hold's conditional debit on the balance, with its transient marker. */
  hold: (c: StoreCommand) =>
    c.name === "UpdateItemCommand" &&
    c.input.TableName === tableNames(process.env).credits &&
    String(c.input.UpdateExpression).includes("#p = :marker"),
  /** s2: the ledger entry that resolves a hold, `settle` or `release`. */
  resolutionEntry: (c: StoreCommand) =>
    c.name === "PutItemCommand" &&
    c.input.TableName === tableNames(process.env).ledger &&
    ["settle", "release"].includes(ledgerEntryType(c.input)),
  /** r3 (hold-items.ts): the refund on the balance, once under its `r_` marker. */
  refund: (c: StoreCommand) =>
    c.name === "UpdateItemCommand" &&
    c.input.TableName === tableNames(process.env).credits &&
    String(c.input.UpdateExpression).includes("#r = :now"),
};

/** The budget counters' writes (adapters/dynamodb/budgets.ts over hold-items.ts). */
export const budgetCommands = {
  /** t1: a budget window's conditional hold, with its transient marker. */
  hold: (c: StoreCommand) =>
    c.name === "UpdateItemCommand" &&
    c.input.TableName === tableNames(process.env).budgetCounters &&
    String(c.input.UpdateExpression).includes("#p = :marker"),
  /** r3: the settlement that turns a hold into its charge on the window, once under its `r_` marker. */
  settle: (c: StoreCommand) =>
    c.name === "UpdateItemCommand" &&
    c.input.TableName === tableNames(process.env).budgetCounters &&
    String(c.input.UpdateExpression).includes("#r = :now"),
};

function ledgerEntryType(input: Record<string, unknown>): string {
  const item = input.Item as { type?: { S?: string } } | undefined;
  return item?.type?.S ?? "";
}

/**
 * Installs a fault injector on a store client's middleware stack, inside the SDK's retry loop: every
 * attempt passes through it, and a matching rule fails that attempt.
 */
export function injectStoreFaults(db: DynamoDBClient): StoreFaults {
  const rules: { rule: StoreFaultRule; left: number }[] = [];
  let injected = 0;
  const take = (command: StoreCommand) => {
    const entry = rules.find((r) => r.left > 0 && r.rule.match(command));
    if (!entry) return undefined;
    entry.left--;
    injected++;
    return entry.rule.kind;
  };
  const failure = (kind: StoreFaultKind) => {
    const $metadata = { httpStatusCode: kind === "error" ? 500 : 400 };
    if (kind === "throttle") {
      return new ProvisionedThroughputExceededException({ message: "injected throttling", $metadata });
    }
    if (kind === "error") return new InternalServerError({ message: "injected store error", $metadata });
    return Object.assign(new Error("injected lost answer"), { name: "TimeoutError", $metadata: {} });
  };
  // Low priority in the finalize step: after the retry middleware, so inside its loop.
  db.middlewareStack.add(
    (next, context) => async (args) => {
      const kind = take({ name: context.commandName ?? "", input: args.input as Record<string, unknown> });
      if (kind === undefined) return next(args);
      if (kind === "lostAnswer") await next(args);
      throw failure(kind);
    },
    { step: "finalizeRequest", priority: "low", name: "reliabilityStoreFaults" },
  );
  return {
    add(rule) {
      rules.push({ rule, left: rule.times ?? Number.POSITIVE_INFINITY });
    },
    clear() {
      rules.length = 0;
    },
    get injected() {
      return injected;
    },
  };
}

/** One response a client got from the proxy. */
export interface Answered {
  url: string;
  status: number;
  /** Our transaction id (`x-dmt-transaction-id`): the id of the call's warehouse record. */
  transactionId: string | null;
  /** A stored response replayed for a repeated X-Request-ID: the vendor was not called. */
  replayed: boolean;
}

/** A fetch that notes every response it gets (the SDKs take one; @google/genai uses the global one). */
export function countingFetch(answered: Answered[], base: typeof fetch = fetch): typeof fetch {
  return async (input, init) => {
    const response = await base(input, init);
    answered.push({
      url: input instanceof Request ? input.url : String(input),
      status: response.status,
      transactionId: response.headers.get(TRANSACTION_ID_HEADER),
      replayed: response.headers.get(REPLAY_HEADER) === "true",
    });
    return response;
  };
}

/** The columns of a warehouse row the reliability checks read. */
export interface WarehouseRow {
  transaction_id: string;
  request_id: string | null;
  project_id: string;
  vendor: string;
  billing_mode: string;
  status_code: number;
  error_type: string | null;
  error_code: string | null;
  streamed: boolean;
  usage_complete: boolean;
  cost_micros: number | null;
  request_body: string | null;
  response_body: string | null;
}

const ROW_COLUMNS =
  "transaction_id, request_id, project_id, vendor, billing_mode, status_code, error_type, error_code, " +
  "streamed, usage_complete, cost_micros, request_body, response_body";

/** Every Parquet file under a folder, recursively. */
export function filesUnder(dir: string): string[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  return names.flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? filesUnder(path) : [path];
  });
}

/**
 * Every row of every Parquet file the local warehouse of `dataDir` wrote, read by DuckDB straight from
 * the files (not through the export path), duplicates included.
 */
export async function warehouseRows(dataDir: string): Promise<WarehouseRow[]> {
  const files = filesUnder(join(dataDir, "warehouse", "interactions")).filter((f) => f.endsWith(".parquet"));
  if (files.length === 0) return [];
  const instance = await DuckDBInstance.create(":memory:");
  try {
    const connection = await instance.connect();
    const list = files.map((f) => `'${f.replaceAll("'", "''")}'`).join(", ");
    const reader = await connection.runAndReadAll(
      `SELECT ${ROW_COLUMNS} FROM read_parquet([${list}], union_by_name = true)`,
    );
    connection.closeSync();
    return reader.getRowObjectsJS().map((row) => ({
      ...(row as unknown as WarehouseRow),
      status_code: Number(row.status_code),
      cost_micros: row.cost_micros === null ? null : Number(row.cost_micros),
    }));
  } finally {
    instance.closeSync();
  }
}

/**
 * Holds whose resolution is missing or not unique (each hold must be settled or released exactly once),
 * from a project's ledger.
 */
export function unresolvedOrDoubled(entries: readonly LedgerEntry[]): string[] {
  const resolutions = new Map<string, number>();
  for (const e of entries)
    if (e.type === "settle" || e.type === "release") {
      resolutions.set(e.ref, (resolutions.get(e.ref) ?? 0) + 1);
    }
  return entries
    .filter((e) => e.type === "hold" && resolutions.get(e.ref) !== 1)
    .map((e) => `${e.ref}: ${resolutions.get(e.ref) ?? 0} resolutions`);
}

/** A project's whole ledger, oldest first. */
export async function allLedgerEntries(credits: DynamoCredits, projectId: string): Promise<LedgerEntry[]> {
  const entries: LedgerEntry[] = [];
  let cursor: string | undefined;
  do {
    const page = await credits.ledger(projectId, { limit: 1000, ...(cursor ? { cursor } : {}) });
    entries.push(...page.entries);
    cursor = page.cursor;
  } while (cursor);
  return entries.reverse();
}

/** Files under `dir` whose bytes contain any of `secrets`, with the secret's index. */
export function filesHoldingSecrets(dir: string, secrets: string[]): string[] {
  const found: string[] = [];
  for (const file of filesUnder(dir)) {
    const bytes = readFileSync(file);
    secrets.forEach((secret, i) => {
      if (bytes.includes(secret)) found.push(`${file} holds secret #${i}`);
    });
  }
  return found;
}

/** Counts of values: `tally(rows, r => r.status_code)` -> {"200": 12, "500": 1}. */
export function tally<T>(items: readonly T[], key: (item: T) => string | number): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const item of items) {
    const k = String(key(item));
    counts[k] = (counts[k] ?? 0) + 1;
  }
  return counts;
}

/**
 * Polls until `probe` returns something other than undefined, and returns it: for outcomes another
 * process or a socket event decides. No time budget of its own (the test's timeout bounds it).
 */
export async function until<T>(
  probe: () => Promise<T | undefined> | T | undefined,
  everyMs = 25,
): Promise<T> {
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    await sleep(everyMs);
  }
}
