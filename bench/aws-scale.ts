/**
 * The AWS scale model (issue #43): the real metering composition of the Lambda proxy (its hooks, credit
 * and budget leases, the DynamoDB adapters, `noteChargesMs: 0`) run as N simulated containers against
 * dynalite, behind a wrapper that enforces DynamoDB's documented per-item and per-partition limits and
 * counts what every table and item receives. The vendor is a wait of `--seconds-per-call`.
 *
 *   npx tsx bench/aws-scale.ts --calls-per-second 1000 --seconds-per-call 20 --duration 30 \
 *     [--compute standard|managed-instances] [--json <file>] [--throttle-rate <p>] [--kill-containers <n>]
 *     [--budgets <n>] [--tpm <tokens a minute>] [--rpm <requests a minute>] [--burst <requests>]
 *
 * Time is VIRTUAL: the clock metering reads is the model's, advanced in ticks of 100 ms once every store
 * request of the tick has been answered (those a call started off its path too). Two cores cannot run dynalite at 1,000 calls a second in real
 * time; the rates below are per virtual second, the rate DynamoDB would see. What the model leaves out is
 * said in bench/README.md ("aws-scale.ts").
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type DynamoDBClient, GetItemCommand } from "@aws-sdk/client-dynamodb";
import { DynamoBudgets } from "../lambda/adapters/dynamodb/budgets";
import { createDynamoClient, ensureTables } from "../lambda/adapters/dynamodb/client";
import { DynamoCredits } from "../lambda/adapters/dynamodb/credits";
import { DynamoRateLimiter } from "../lambda/adapters/dynamodb/rate-limit";
import { tableNames } from "../lambda/adapters/dynamodb/tables";
import { activePriceCatalogue } from "../lambda/adapters/fs/price-catalogue";
import { MemoryIdempotency } from "../lambda/adapters/memory/idempotency";
import { MemoryMasterKey } from "../lambda/adapters/memory/key-wrapper";
import { MemoryVendorKeys } from "../lambda/adapters/memory/vendor-keys";
import {
  counterId,
  newBudget,
  tpmCounterId,
  tpmShardCount,
  tpmSpan,
  windowSpan,
} from "../lambda/core/budgets";
import type { ProxyCall } from "../lambda/core/call";
import type { LedgerEntry } from "../lambda/core/credits";
import { silentLogger } from "../lambda/core/logger";
import { CachedVendorKeys } from "../lambda/core/metering-vendor-keys";
import { startEmbeddedDynamo } from "../lambda/local/embedded-dynamo";
import { BudgetGuard, sweepHolds } from "../lambda/metering/budgets";
import type { LeaseTimes } from "../lambda/metering/credit-leases";
import { createMetering, type Metering } from "../lambda/metering/hooks";
import { chatCall, outcomeOf, runCall } from "../test/support/proxy-calls";
import { type LimitReport, limitedClient } from "./lib/dynamo-limits";
import { flagPairs } from "./lib/flags";
import { LambdaScaling } from "./lib/lambda-scaling";

interface Options {
  callsPerSecond: number;
  secondsPerCall: number;
  duration: number;
  compute: "standard" | "managed-instances";
  json: string | undefined;
  throttleRate: number;
  killContainers: number;
  budgets: number;
  /** The key's tokens-per-minute limit (0: none). */
  tpm: number;
  /** The key's rate limit (an enterprise project's custom one), taken from DynamoDB as in Lambda. */
  rpm: number;
  burst: number;
}

function parseArgs(argv: string[]): Options {
  const o: Options = {
    callsPerSecond: 50,
    secondsPerCall: 20,
    duration: 30,
    compute: "standard",
    json: undefined,
    throttleRate: 0,
    killContainers: 0,
    budgets: 1,
    tpm: 0,
    rpm: 120_000,
    burst: 10_000,
  };
  for (const { flag, value, num } of flagPairs(argv)) {
    if (flag === "--calls-per-second") o.callsPerSecond = num();
    else if (flag === "--seconds-per-call") o.secondsPerCall = num();
    else if (flag === "--duration") o.duration = num();
    else if (flag === "--throttle-rate") o.throttleRate = num();
    else if (flag === "--kill-containers") o.killContainers = num();
    else if (flag === "--budgets") o.budgets = num();
    else if (flag === "--tpm") o.tpm = num();
    else if (flag === "--rpm") o.rpm = num();
    else if (flag === "--burst") o.burst = num();
    else if (flag === "--json") o.json = value;
    else if (flag === "--compute") {
      if (value !== "standard" && value !== "managed-instances") {
        throw new Error(`--compute must be standard or managed-instances, not '${value}'`);
      }
      o.compute = value;
    } else throw new Error(`unknown flag ${flag}`);
  }
  return o;
}

const TICK_MS = 100;
const MINUTE = 60_000;
/** The Lambda proxy's hold TTL (DMT_HOLD_TTL_MS's default). */
const HOLD_TTL_MS = 3_600_000;
/** Calls one managed-instances environment serves at once (64 per vCPU, 2 vCPUs). */
const PER_ENVIRONMENT = 128;
const PROJECT = "proj-scale";
const KEY_ID = "scalekey00000001";
/**
 * The Lambda handler's lease times (lambda/handlers/proxy.ts): open 15 minutes, and on standard compute
 * kept through idle time (a frozen container settles nothing); BEFORE=1 runs main's defaults.
 */
function leaseTimes(compute: Options["compute"]): LeaseTimes {
  if (process.env.BEFORE === "1") return {};
  return { openMs: 15 * MINUTE, ...(compute === "standard" && { idleMs: 15 * MINUTE }) };
}
/** The Lambda handler's TPM shards (lambda/handlers/proxy.ts); BEFORE=1 (or TPM_SHARDS=1): one counter. */
const TPM_SHARDS = process.env.BEFORE === "1" ? 1 : Number(process.env.TPM_SHARDS ?? 16);
/** The Lambda functions' rate-limit shards (runtime/aws.ts); BEFORE=1 (or RATE_SHARDS=1): one bucket. */
const RATE_SHARDS = process.env.BEFORE === "1" ? 1 : Number(process.env.RATE_SHARDS ?? 16);
const USAGE = { inputTokens: 1_000, outputTokens: 400 };
/** The quota the concurrency is counted against (Service Quotas, Lambda, "Concurrent executions"). */
const CONCURRENCY_QUOTA = "Concurrent executions (Lambda, per Region; default 1,000)";

interface Container {
  id: number;
  metering: Metering;
  running: number;
  dead: boolean;
}

async function main(): Promise<void> {
  const options = parseArgs(process.argv.slice(2));
  const dir = mkdtempSync(join(tmpdir(), "dmt-aws-scale-"));
  const dynamo = await startEmbeddedDynamo(dir);
  const T0 = Date.UTC(2026, 11, 7, 12);
  let now = T0;
  const clock = () => now;
  const names = tableNames({}, "scale-");
  const raw = createDynamoClient({ endpoint: dynamo.endpoint });
  await ensureTables(raw, names);
  // The proxy's store client, behind DynamoDB's limits.
  const { db, limits } = limitedClient(dynamo.endpoint, names, {
    clock,
    throttleRate: options.throttleRate,
    watched: new Set([names.credits, names.ledger, names.budgetCounters, names.rateLimits]),
  });

  // The project: a large grant and hard budgets no call reaches.
  const admin = new DynamoCredits(raw, names, clock);
  const adminBudgets = new DynamoBudgets(raw, names, clock);
  const GRANT = 900_000_000_000;
  await admin.grant(PROJECT, GRANT, "bench");
  const budgets = [];
  for (let i = 0; i < options.budgets; i++) {
    const budget = newBudget(
      { projectId: PROJECT, usd: "900000", window: i % 2 === 0 ? "month" : "day" },
      T0,
      `${PROJECT}.budget${i}0`,
    );
    await adminBudgets.put(budget);
    budgets.push(budget);
  }
  limits.reset();

  const prices = activePriceCatalogue({});
  const vendorKeys = new MemoryVendorKeys(new MemoryMasterKey(), clock);
  const containers: Container[] = [];
  const idle: Container[] = [];
  const dead = new Set<number>();
  /** The containers' store requests in flight, the SDK's retries included. */
  let sending = 0;
  const newContainer = (): Container => {
    const id = containers.length;
    // Each container its own adapters, over one client whose requests hang once the container is killed.
    const own = {
      send: (command: unknown) => {
        if (dead.has(id)) return new Promise(() => {});
        sending++;
        return db.send(command as never).finally(() => sending--);
      },
    };
    const client = own as unknown as DynamoDBClient;
    const metering = createMetering({
      credits: new DynamoCredits(client, names, clock),
      limiter: new DynamoRateLimiter(client, names, clock, { shards: RATE_SHARDS }),
      idempotency: new MemoryIdempotency(clock),
      vendorKeys: new CachedVendorKeys(vendorKeys, 5_000, 100, clock),
      prices,
      logger: silentLogger,
      clock,
      holdTtlMs: HOLD_TTL_MS,
      noteChargesMs: 0,
      leases: leaseTimes(options.compute),
      budgets: new BudgetGuard({
        counters: new DynamoBudgets(client, names, clock),
        clock,
        logger: silentLogger,
        cacheMs: 5_000,
        holdTtlMs: HOLD_TTL_MS,
        noteChargesMs: 0,
        leases: leaseTimes(options.compute),
        tpmShards: TPM_SHARDS,
      }),
    });
    const container = { id, metering, running: 0, dead: false };
    containers.push(container);
    return container;
  };
  const capacity = options.compute === "standard" ? 1 : PER_ENVIRONMENT;
  // Standard compute scales at Lambda's documented rate (bench/lib/lambda-scaling.ts); a call that finds
  // no free environment and no room to start one gets Lambda's 429, never reaching the handler. Managed
  // instances scale their capacity provider on CPU, not per call: not limited here (8 environments).
  const scaling = new LambdaScaling(T0);
  const place = (): Container | null => {
    // Lambda reuses the warm container freed last; a new one only when none is free.
    for (;;) {
      const c = idle.pop();
      if (!c) return options.compute === "standard" && !scaling.tryStart(now) ? null : newContainer();
      if (!c.dead && c.running < capacity) return c;
    }
  };
  let inFlight = 0;
  let peakInFlight = 0;
  const lambda = { throttled429: 0, firstThrottleAt: null as number | null };

  interface Running {
    call: ProxyCall;
    container: Container;
    endsAt: number;
  }
  const running: Running[] = [];
  const stats = {
    started: 0,
    completed: 0,
    refused: 0,
    failed: 0,
    chargedMicros: 0,
    refusals: {} as Record<string, number>,
    tokens: 0,
  };
  const charged = (call: ProxyCall) => call.billing?.costMicros ?? 0;
  const endArrivals = T0 + options.duration * 1000;
  // Kills start half-way (at the earliest once the first calls ended): only containers between calls,
  // whose leases are open, as Lambda reaps or loses an idle container.
  const killFrom = T0 + Math.floor((options.duration * 1000) / 2 / TICK_MS) * TICK_MS;
  let owed = 0;
  const wallStart = Date.now();
  let killed = 0;

  while (now < endArrivals || running.length > 0) {
    const work: Promise<void>[] = [];
    // Calls that end now: their after-work, awaited as the Lambda handler awaits it.
    for (let i = running.length - 1; i >= 0; i--) {
      const r = running[i] as Running;
      if (r.endsAt > now) continue;
      running.splice(i, 1);
      work.push(
        (async () => {
          try {
            await r.container.metering.after?.(r.call, outcomeOf(USAGE));
            stats.completed++;
            stats.chargedMicros += charged(r.call);
            stats.tokens += USAGE.inputTokens + USAGE.outputTokens;
          } catch {
            stats.failed++;
          } finally {
            inFlight--;
            r.container.running--;
            if (r.container.running === capacity - 1) idle.push(r.container);
          }
        })(),
      );
    }
    if (now < endArrivals) {
      owed += (options.callsPerSecond * TICK_MS) / 1000;
      for (; owed >= 1; owed--) {
        const container = place();
        if (!container) {
          lambda.throttled429++;
          lambda.firstThrottleAt ??= (now - T0) / 1000;
          continue;
        }
        inFlight++;
        peakInFlight = Math.max(peakInFlight, inFlight);
        container.running++;
        if (container.running < capacity) idle.push(container);
        const call = chatCall({
          projectId: PROJECT,
          keyId: KEY_ID,
          startedAt: now,
          maxTokens: 1_000,
          auth: {
            rateLimit: { rpm: options.rpm, burst: options.burst },
            ...(options.tpm > 0 && { tpm: options.tpm }),
          },
        });
        stats.started++;
        work.push(
          (async () => {
            try {
              const admission = await runCall(container.metering, call);
              if (admission.refused) {
                stats.refused++;
                stats.refusals[admission.refused.code] = (stats.refusals[admission.refused.code] ?? 0) + 1;
                inFlight--;
                container.running--;
                if (container.running === capacity - 1) idle.push(container);
                return;
              }
              running.push({ call, container, endsAt: now + options.secondsPerCall * 1000 });
            } catch {
              stats.failed++;
              inFlight--;
              container.running--;
              if (container.running === capacity - 1) idle.push(container);
            }
          })(),
        );
      }
    }
    await Promise.all(work);
    // The work a call started off its path (a take's t2 and t3, a settlement's last steps) ends in
    // milliseconds in AWS, well inside a tick: the clock moves on once no request is in flight.
    while (sending > 0) await new Promise((resolve) => setTimeout(resolve, 2));
    if (killed < options.killContainers && now >= killFrom) {
      // Killed between calls, with their leases open: nothing of theirs reaches the store again.
      for (const c of [...containers].reverse()) {
        if (killed >= options.killContainers) break;
        if (c.running === 0 && !c.dead) {
          c.dead = true;
          dead.add(c.id);
          killed++;
        }
      }
    }
    now += TICK_MS;
    if ((now - T0) % 5_000 === 0) {
      process.stderr.write(
        `t=${(now - T0) / 1000}s started=${stats.started} done=${stats.completed} containers=${containers.length} wall=${((Date.now() - wallStart) / 1000).toFixed(0)}s\n`,
      );
    }
  }
  const arrivalsReport: LimitReport = limits.report();
  const hottestTpm = options.tpm > 0 ? limits.hottestWhere("tpm#") : null;
  const hottestBucket = limits.hottestWhere("key:");
  // The end happens at one instant of the model's clock: counted from here, not refused.
  limits.enforce = false;

  // The end: live containers idle out and settle; the dead ones' leases wait for the sweeper.
  for (const c of containers) if (!c.dead) await c.metering.settle();
  const sweepAt = now + HOLD_TTL_MS + 31 * MINUTE;
  const sweepStart = limits.snapshot();
  const sweep = await sweepHolds(
    new DynamoCredits(db, names, clock),
    new DynamoBudgets(db, names, clock),
  ).releaseExpired(sweepAt);
  const sweepReads = limits.since(sweepStart);

  // Reconcile: the balance, the ledger and every window against the calls' charges (the records).
  const balance = await admin.balance(PROJECT);
  let ledgerSum = 0;
  let settledCharged = 0;
  let cursor: string | undefined;
  do {
    const page = await admin.ledger(PROJECT, { limit: 1000, ...(cursor ? { cursor } : {}) });
    for (const e of page.entries as LedgerEntry[]) {
      ledgerSum += e.deltaMicros;
      if (e.type === "settle") settledCharged += e.chargedMicros ?? 0;
    }
    cursor = page.cursor;
  } while (cursor);
  const windows = [];
  for (const budget of budgets) {
    const id = counterId(budget, windowSpan(budget.window, T0), null);
    const spend = await adminBudgets.spend(id);
    const item = await raw.send(
      new GetItemCommand({
        TableName: names.budgetCounters,
        Key: { counterId: { S: id } },
        ConsistentRead: true,
      }),
    );
    windows.push({
      counterId: id,
      spentMicros: spend.spentMicros,
      heldMicros: spend.heldMicros,
      exact: spend.spentMicros === stats.chargedMicros && spend.heldMicros === 0,
      gcAt: item.Item?.gcAt?.N === undefined ? null : Number(item.Item.gcAt.N),
    });
  }
  // The key's TPM minutes: each counts the real tokens of the calls admitted in it, nothing left held.
  let tpm: {
    tokensCounted: number;
    heldTokens: number;
    exact: boolean;
    minutes: number;
    shards: number;
  } | null = null;
  if (options.tpm > 0) {
    let counted = 0;
    let held = 0;
    const first = Math.floor(T0 / MINUTE);
    const last = Math.floor(endArrivals / MINUTE);
    for (let minute = first; minute <= last; minute++) {
      const span = tpmSpan(minute * MINUTE);
      const shards = tpmShardCount(options.tpm, TPM_SHARDS);
      const ids =
        shards === 1
          ? [tpmCounterId(KEY_ID, span)]
          : Array.from({ length: shards }, (_, k) => tpmCounterId(KEY_ID, span, k));
      for (const id of ids) {
        const spend = await adminBudgets.spend(id);
        counted += spend.spentMicros;
        held += spend.heldMicros;
      }
    }
    tpm = {
      tokensCounted: counted,
      heldTokens: held,
      exact: counted === stats.tokens && held === 0,
      minutes: last - first + 1,
      shards: tpmShardCount(options.tpm, TPM_SHARDS),
    };
  }
  const reconciled = {
    grantedMicros: GRANT,
    availableMicros: balance.availableMicros,
    openHolds: balance.openHolds,
    chargedByCalls: stats.chargedMicros,
    chargedBySettlements: settledCharged,
    ledgerSumEqualsBalance: ledgerSum === balance.availableMicros,
    balanceExact:
      GRANT - balance.availableMicros === stats.chargedMicros &&
      settledCharged === stats.chargedMicros &&
      balance.openHolds === 0 &&
      ledgerSum === balance.availableMicros,
    windows,
    windowsExact: windows.every((w) => w.exact),
    tpm,
  };

  // The metering path's tables, the key's rate-limit bucket with them.
  const meteringWcu = ["credits", "ledger", "budgetCounters", "rateLimits"].reduce(
    (sum, t) => sum + (arrivalsReport.tables[t]?.wcu ?? 0),
    0,
  );
  const bucketWcu = arrivalsReport.tables.rateLimits?.wcu ?? 0;
  // The holds' index (holdsDue, keys only) on credits and budget counters: its entries' writes.
  const indexWcu = ["credits", "budgetCounters"].reduce(
    (sum, t) => sum + (arrivalsReport.tables[t]?.indexWcu ?? 0),
    0,
  );
  const result = {
    model: {
      clock:
        "virtual: 100-ms ticks, each advanced once every store request of the tick was answered (time compressed)",
      wallSeconds: Math.round((Date.now() - wallStart) / 1000),
      compute: options.compute,
      callsPerSecond: options.callsPerSecond,
      secondsPerCall: options.secondsPerCall,
      durationSeconds: options.duration,
      budgets: options.budgets,
      throttleRate: options.throttleRate,
      killContainers: options.killContainers,
      rateLimit: { rpm: options.rpm, burst: options.burst, maxShards: RATE_SHARDS },
      containers: containers.length,
      holdTtlMs: HOLD_TTL_MS,
    },
    calls: { ...stats, killedContainers: killed },
    lambda: {
      scalingRate:
        options.compute === "standard"
          ? "1,000 new environments at once, refilled 100 a second (scaling-behavior.html)"
          : "not modelled (capacity provider)",
      throttled429: lambda.throttled429,
      firstThrottleAtSecond: lambda.firstThrottleAt,
      peakConcurrency: peakInFlight,
      peakEnvironments: containers.length,
      steadyConcurrency: Math.ceil(options.callsPerSecond * options.secondsPerCall),
      quota: CONCURRENCY_QUOTA,
    },
    throttledRequests: Object.fromEntries(
      Object.entries(arrivalsReport.tables).map(([t, s]) => [t, s.throttled]),
    ),
    injectedThrottles: arrivalsReport.injected,
    tables: arrivalsReport.tables,
    hottestItem: arrivalsReport.hottest,
    hottestIndexPartition: arrivalsReport.hottestIndexPartition,
    hottestTpmItem: hottestTpm,
    hottestRateLimitItem: hottestBucket,
    largestItem: arrivalsReport.largest,
    wcuPerCall: stats.completed > 0 ? Number((meteringWcu / stats.completed).toFixed(3)) : null,
    wcuPerCallRateLimit: stats.completed > 0 ? Number((bucketWcu / stats.completed).toFixed(3)) : null,
    wcuPerCallIndexes: stats.completed > 0 ? Number((indexWcu / stats.completed).toFixed(3)) : null,
    sweep: { ...sweep, requests: sweepReads },
    reconciled,
  };
  const print = (label: string, value: unknown) =>
    process.stdout.write(
      `${label.padEnd(34)} ${typeof value === "string" ? value : JSON.stringify(value)}\n`,
    );
  process.stdout.write(
    "\nAWS scale model (virtual clock, time compressed: rates are per simulated second)\n",
  );
  print("calls started / completed", `${stats.started} / ${stats.completed}`);
  print("refused / failed", `${stats.refused} ${JSON.stringify(stats.refusals)} / ${stats.failed}`);
  print("containers (killed)", `${containers.length} (${killed})`);
  print("Lambda 429s (scaling rate)", `${lambda.throttled429} (first at ${lambda.firstThrottleAt ?? "-"} s)`);
  print("peak concurrency / steady state", `${peakInFlight} / ${result.lambda.steadyConcurrency}`);
  print("throttled requests per table", result.throttledRequests);
  print("injected throttles", arrivalsReport.injected);
  print("hottest item WCU/s", arrivalsReport.hottest);
  print("hottest index partition WCU/s", arrivalsReport.hottestIndexPartition);
  print("largest item", arrivalsReport.largest);
  if (hottestTpm) print("hottest TPM counter WCU/s", hottestTpm);
  print("hottest rate-limit bucket WCU/s", hottestBucket);
  print("WCU per call (metering tables)", result.wcuPerCall);
  print("  of which the rate-limit bucket", result.wcuPerCallRateLimit);
  print("  of which the holds' index", result.wcuPerCallIndexes);
  print("sweeper", result.sweep);
  print("balance exact", reconciled.balanceExact);
  print("windows exact", reconciled.windowsExact);
  if (tpm) print("TPM minutes exact", tpm);
  print("wall seconds", result.model.wallSeconds);
  if (options.json) writeFileSync(options.json, `${JSON.stringify(result, null, 2)}\n`);
  raw.destroy();
  db.destroy();
  await dynamo.close();
  rmSync(dir, { recursive: true, force: true });
  process.exit(reconciled.balanceExact && reconciled.windowsExact && (tpm?.exact ?? true) ? 0 : 1);
}

await main();
