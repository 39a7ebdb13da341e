/**
 * The reconciliation harness: a mixed workload through the official SDKs (all four vendor families,
 * streams and not, managed / BYOK / dual keys, X-Request-ID retries), then a count of what the service
 * answered against what it stored and charged. Used by test/reliability/reconcile.test.ts (small) and
 * bench/reconcile.ts (large).
 */
import Anthropic from "@anthropic-ai/sdk";
import { GoogleGenAI } from "@google/genai";
import OpenAI from "openai";
import type { DynamoCredits } from "../../lambda/adapters/dynamodb/credits";
import { VENDOR_NAMES, type VendorName } from "../../lambda/core/vendor-model";
import type { RecordedRequest } from "../../lambda/local/simulator";
import {
  type Answered,
  allLedgerEntries,
  countingFetch,
  filesHoldingSecrets,
  tally,
  unresolvedOrDoubled,
  type WarehouseRow,
  warehouseRows,
} from "./reliability";

export type CallMode = "managed" | "byok" | "dual";

export interface WorkloadKeys {
  /** A key of the project that pays with credits. */
  managed: string;
  /** A key of a project that stored a vendor key for every vendor. */
  byok: string;
  /** The vendor half of dual keys (sent with the managed project's key). */
  dualVendorKey: string;
}

export interface WorkloadOptions {
  url: string;
  keys: WorkloadKeys;
  calls: number;
  concurrency: number;
  /** Every n-th call (managed, OpenAI family or Anthropic) carries an X-Request-ID and is sent twice. */
  idempotentEvery: number;
  /** Distinguishes the X-Request-IDs of two runs against the same store. */
  runId: string;
  /** Streams ask for their cost in the last usage event (`X-DMT-Include-Cost: 1`). */
  includeCost?: boolean;
}

export interface PlannedCall {
  index: number;
  vendor: VendorName;
  stream: boolean;
  mode: CallMode;
  requestId?: string;
}

export interface WorkloadResult {
  plan: PlannedCall[];
  /** Every response the SDKs got, retries included. */
  answered: Answered[];
  /** Calls the SDK gave up on (a vendor error it does not retry, say): counted, not fatal. */
  failed: { index: number; error: string }[];
  /** With `includeCost`: each streamed answer's `dmt_cost_usd`, as the SDK parsed it. */
  streamCosts: { call: PlannedCall; costUsd: string }[];
  seconds: number;
}

const MODES: CallMode[] = ["managed", "managed", "byok", "dual"];
const MODELS: Record<VendorName, string> = {
  groq: "llama-3.1-8b-instant",
  openai: "gpt-4o-mini",
  anthropic: "claude-haiku-4-5",
  gemini: "gemini-2.5-flash",
};
const MAX_TOKENS = 24;

/** The i-th call of the mix: vendors in turn, then stream or not, then the billing mode. */
export function planCall(
  index: number,
  options: Pick<WorkloadOptions, "idempotentEvery" | "runId">,
): PlannedCall {
  const vendor = VENDOR_NAMES[index % VENDOR_NAMES.length] as VendorName;
  const stream = Math.floor(index / 4) % 2 === 1;
  const mode = MODES[Math.floor(index / 8) % MODES.length] as CallMode;
  const idempotent = mode === "managed" && vendor !== "gemini" && index % options.idempotentEvery === 0;
  return {
    index,
    vendor,
    stream,
    mode,
    ...(idempotent ? { requestId: `rel-${options.runId}-${index}` } : {}),
  };
}

type Client = OpenAI | Anthropic | GoogleGenAI;

function apiKeyFor(mode: CallMode, keys: WorkloadKeys): string {
  if (mode === "byok") return keys.byok;
  if (mode === "dual") return `${keys.managed};${keys.dualVendorKey}`;
  return keys.managed;
}

function clientFor(vendor: VendorName, apiKey: string, url: string, fetch: typeof globalThis.fetch): Client {
  // Retries as the SDKs do them (5xx, 409, 429), a few more than by default: they are part of the mix.
  if (vendor === "openai" || vendor === "groq") {
    return new OpenAI({ apiKey, baseURL: `${url}/${vendor}/v1`, fetch, maxRetries: 5 });
  }
  if (vendor === "anthropic")
    return new Anthropic({ apiKey, baseURL: `${url}/anthropic`, fetch, maxRetries: 5 });
  return new GoogleGenAI({ apiKey, httpOptions: { baseUrl: `${url}/gemini` } });
}

/** `dmt_cost_usd` of a usage object the SDKs' types do not know it in. */
const costIn = (usage: unknown): string | undefined =>
  typeof usage === "object" && usage !== null && "dmt_cost_usd" in usage
    ? String(usage.dmt_cost_usd)
    : undefined;

/** Sends one call; a stream's answer gives the last `dmt_cost_usd` it carried, if any. */
async function send(client: Client, call: PlannedCall, includeCost: boolean): Promise<string | undefined> {
  const prompt = `Call ${call.index}: say something about ledgers and counting.`;
  const headers: Record<string, string> = {
    ...(call.requestId ? { "X-Request-ID": call.requestId } : {}),
    ...(includeCost && call.stream ? { "X-DMT-Include-Cost": "1" } : {}),
  };
  const model = MODELS[call.vendor];
  let cost: string | undefined;
  if (client instanceof OpenAI) {
    const body = { model, messages: [{ role: "user" as const, content: prompt }], max_tokens: MAX_TOKENS };
    if (!call.stream) {
      await client.chat.completions.create(body, { headers });
      return;
    }
    const usage = includeCost ? { stream_options: { include_usage: true } } : {};
    for await (const chunk of await client.chat.completions.create(
      { ...body, ...usage, stream: true },
      { headers },
    )) {
      cost = costIn(chunk.usage) ?? cost;
    }
    return cost;
  }
  if (client instanceof Anthropic) {
    const body = { model, max_tokens: MAX_TOKENS, messages: [{ role: "user" as const, content: prompt }] };
    if (!call.stream) {
      await client.messages.create(body, { headers });
      return;
    }
    for await (const event of await client.messages.create({ ...body, stream: true }, { headers })) {
      if (event.type === "message_delta") cost = costIn(event.usage) ?? cost;
    }
    return cost;
  }
  const config = {
    maxOutputTokens: MAX_TOKENS,
    ...(includeCost && call.stream ? { httpOptions: { headers } } : {}),
  };
  const request = { model, contents: prompt, config };
  if (!call.stream) {
    await client.models.generateContent(request);
    return;
  }
  for await (const chunk of await client.models.generateContentStream(request)) {
    cost = costIn(chunk.usageMetadata) ?? cost;
  }
  return cost;
}

/**
 * Runs `calls` calls of the mix, `concurrency` at a time. A call with an X-Request-ID is sent twice, the
 * second after the first returned: a replay (or a 409 the SDK retries until it is one).
 */
export async function runMixedWorkload(options: WorkloadOptions): Promise<WorkloadResult> {
  const answered: Answered[] = [];
  const failed: WorkloadResult["failed"] = [];
  const streamCosts: WorkloadResult["streamCosts"] = [];
  const original = globalThis.fetch;
  const counting = countingFetch(answered, original);
  const clients = new Map<string, Client>();
  const clientOf = (call: PlannedCall) => {
    const name = `${call.mode}:${call.vendor}`;
    let client = clients.get(name);
    if (!client) {
      client = clientFor(call.vendor, apiKeyFor(call.mode, options.keys), options.url, counting);
      clients.set(name, client);
    }
    return client;
  };
  const plan = Array.from({ length: options.calls }, (_, i) => planCall(i, options));
  let next = 0;
  const worker = async () => {
    for (let call = plan[next++]; call; call = plan[next++]) {
      const client = clientOf(call);
      for (let round = 0; round < (call.requestId ? 2 : 1); round++) {
        try {
          const costUsd = await send(client, call, options.includeCost ?? false);
          if (costUsd !== undefined) streamCosts.push({ call, costUsd });
        } catch (err) {
          failed.push({ index: call.index, error: (err as Error).message.slice(0, 200) });
        }
      }
    }
  };
  // @google/genai takes no fetch of its own: the global one counts while the workload runs.
  globalThis.fetch = counting;
  const started = performance.now();
  try {
    await Promise.all(Array.from({ length: options.concurrency }, worker));
  } finally {
    globalThis.fetch = original;
  }
  return { plan, answered, failed, streamCosts, seconds: (performance.now() - started) / 1000 };
}

export interface ReconcileInput {
  dataDir: string;
  credits: DynamoCredits;
  managedProject: string;
  byokProject: string;
  /** Credits granted to each project before the run, micro-USD. */
  grants: { managed: number; byok: number };
  /** What reached the vendor (the simulator's log). */
  vendorRequests: readonly RecordedRequest[];
  /** Secrets that must appear in no file the warehouse wrote. */
  secrets: string[];
}

export interface Reconciliation {
  figures: {
    answered: number;
    records: number;
    distinctRecordIds: number;
    replayed: number;
    refusedByUs: number;
    vendorCalls: number;
    vendorRequests: number;
    managedRecords: number;
    holds: number;
    settles: number;
    releases: number;
    openHolds: number;
    managedRecordsWithCost: number;
    recordCostMicros: number;
    chargedMicros: number;
    managedBalanceMicros: number;
    expectedManagedBalanceMicros: number;
    byokBalanceMicros: number;
    recordsByMode: Record<string, number>;
    recordsByStatus: Record<string, number>;
  };
  /** Every invariant that does not hold, in words; empty when the books balance. */
  violations: string[];
}

/**
 * Proves by counting that every answered request became exactly one record, and that managed records
 * and the ledger agree: every hold (a credit lease, paying for several calls) resolved once, the
 * settlements paying for each charged call once, charges equal to the records' costs, and the balance
 * equal to the grant less those costs.
 */
export async function reconcile(
  answered: readonly Answered[],
  input: ReconcileInput,
): Promise<Reconciliation> {
  const rows = await warehouseRows(input.dataDir);
  const violations: string[] = [];
  const check = (ok: boolean, what: string) => {
    if (!ok) violations.push(what);
  };

  const answeredIds = answered.map((a) => a.transactionId);
  const recordIds = new Set(rows.map((r) => r.transaction_id));
  check(
    answeredIds.every((id) => id !== null),
    "every proxy response carries its transaction id",
  );
  check(new Set(answeredIds).size === answered.length, "transaction ids are unique per response");
  check(recordIds.size === rows.length, "no record is stored twice");
  check(rows.length === answered.length, `records (${rows.length}) = answered (${answered.length})`);
  const missing = answeredIds.filter((id) => id !== null && !recordIds.has(id));
  check(missing.length === 0, `${missing.length} answered requests have no record`);

  // Refused before the vendor was called: every error type but the vendor's and a broken stream's.
  const reachedVendor = new Set([null, "vendor_error", "upstream_error", "client_error"]);
  const ours = (r: WarehouseRow) => !reachedVendor.has(r.error_type);
  const replayed = answered.filter((a) => a.replayed).length;
  const refusedByUs = rows.filter(ours).length;
  const vendorCalls = rows.length - replayed - refusedByUs;
  check(
    vendorCalls === input.vendorRequests.length,
    `vendor calls by the records (${vendorCalls}) = requests the vendor saw (${input.vendorRequests.length})`,
  );

  const managed = rows.filter((r) => r.project_id === input.managedProject && r.billing_mode === "managed");
  const entries = await allLedgerEntries(input.credits, input.managedProject);
  const count = (type: string) => entries.filter((e) => e.type === type).length;
  const holds = count("hold");
  const settles = count("settle");
  const releases = count("release");
  const balance = await input.credits.balance(input.managedProject);
  const recordCostMicros = managed.reduce((sum, r) => sum + (r.cost_micros ?? 0), 0);
  const chargedMicros = entries
    .filter((e) => e.type === "settle")
    .reduce((sum, e) => sum + (e.chargedMicros ?? 0), 0);
  const managedRecordsWithCost = managed.filter((r) => (r.cost_micros ?? 0) > 0).length;
  const expectedManagedBalanceMicros = input.grants.managed - recordCostMicros;
  check(holds === settles + releases, `holds (${holds}) = settlements + releases (${settles + releases})`);
  check(balance.openHolds === 0, `no hold is left open (${balance.openHolds})`);
  const badHolds = unresolvedOrDoubled(entries);
  check(badHolds.length === 0, `every hold resolved exactly once: ${badHolds.slice(0, 5).join("; ")}`);
  const paidCalls = entries.filter((e) => e.type === "settle").reduce((sum, e) => sum + (e.calls ?? 0), 0);
  check(
    paidCalls === managedRecordsWithCost,
    `calls the settlements paid for (${paidCalls}) = managed records with a cost (${managedRecordsWithCost})`,
  );
  check(
    chargedMicros === recordCostMicros,
    `charged (${chargedMicros}) = records' cost (${recordCostMicros})`,
  );
  check(
    balance.availableMicros === expectedManagedBalanceMicros,
    `balance (${balance.availableMicros}) = grant - records' cost (${expectedManagedBalanceMicros})`,
  );
  check(
    entries.reduce((sum, e) => sum + e.deltaMicros, 0) === balance.availableMicros,
    "the ledger's deltas sum to the balance",
  );

  const byok = await input.credits.balance(input.byokProject);
  check(byok.availableMicros === input.grants.byok, "BYOK calls leave the balance untouched");
  check(
    rows.filter((r) => r.project_id === input.byokProject).every((r) => r.billing_mode === "byok"),
    "the BYOK project's records say byok",
  );
  const leaks = filesHoldingSecrets(input.dataDir, input.secrets);
  check(leaks.length === 0, `no secret in the data dir: ${leaks.join("; ")}`);

  return {
    figures: {
      answered: answered.length,
      records: rows.length,
      distinctRecordIds: recordIds.size,
      replayed,
      refusedByUs,
      vendorCalls,
      vendorRequests: input.vendorRequests.length,
      managedRecords: managed.length,
      holds,
      settles,
      releases,
      openHolds: balance.openHolds,
      managedRecordsWithCost,
      recordCostMicros,
      chargedMicros,
      managedBalanceMicros: balance.availableMicros,
      expectedManagedBalanceMicros,
      byokBalanceMicros: byok.availableMicros,
      recordsByMode: tally(rows, (r) => `${r.billing_mode}${r.streamed ? "/stream" : ""}`),
      recordsByStatus: tally(rows, (r) => r.status_code),
    },
    violations,
  };
}
