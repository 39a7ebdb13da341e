import { type MessagePort, parentPort, Worker, workerData } from "node:worker_threads";
import type { DynamoDBClient } from "../adapters/dynamodb/client";
import { DynamoPorts } from "../adapters/dynamodb/ports";
import type { TableNames } from "../adapters/dynamodb/tables";
import { storeCopies } from "../compose/consumer";
import type { MeterConfig } from "../core/billing-meter";
import type { EventPublisher } from "../core/cloudevent";
import type { CopyPurger } from "../core/deletion";
import { errorFields, type Logger, loggerOver } from "../core/logger";
import type { RecordQueue } from "../core/queue";
import type { InteractionRecord } from "../core/record";
import { storeClient } from "./dynalite-client";
import { openWarehouseReads, startWarehouseQueue, type WarehouseReads } from "./warehouse";

/** What the warehouse worker starts from. */
export interface WarehouseWorkerData {
  dataDir: string;
  /** The store the worker writes the dashboard's index and rollups to, and reads tombstones from. */
  endpoint: string;
  /** Whether that store is the data dir's own dynalite (LocalStore.dynalite). */
  dynalite: boolean;
  /** A message port to that store, if this process runs it (LocalStore.connect): used instead of `endpoint`. */
  storePort?: MessagePort;
  tables: TableNames;
  flushIntervalMs: number;
  /** The billing exports' settings (the Stripe key among them: handed over in memory, never logged). */
  meter?: MeterConfig;
}

/** A request to the worker; it answers each one with `done` once it is carried out. */
export type WorkerRequest =
  | { type: "send"; id: number; bodies: string[] }
  | { type: "deliver"; id: number }
  | { type: "close"; id: number };

export type WorkerReport =
  | { type: "ready" }
  | { type: "done"; id: number }
  | {
      type: "log";
      level: "debug" | "info" | "warn" | "error";
      message: string;
      fields?: Record<string, unknown>;
    };

/** Records handed over in one turn, on their way to the worker in one message. */
interface Batch {
  bodies: string[];
  /** Settles once the worker has them all in its journal. */
  answered: Promise<void>;
  /** Posts them now, if not yet. */
  post(): void;
}

/** A worker that failed to start is replaced after this pause, so a persistent fault cannot spin. */
const RESTART_PAUSE_MS = 1000;
/** Closing, a worker that fails to start this many times in a row is given up on: a shutdown ends. */
const STARTS_WHILE_CLOSING = 3;

/**
 * The local warehouse's writing side in a worker thread (`runWarehouseWorker` below): the
 * in-process queue with its journal, the consumer Lambda runs, and the dashboard's index writer, whose
 * CPU (JSON, Parquet, store writes) would otherwise delay the server's requests. This side only posts:
 * `send` serialises the record and resolves once the worker has it in the journal. The records sent
 * in one turn of the event loop go in one message: one wake-up of the worker for them all.
 *
 * Requests stay here until answered. A worker that dies is logged and replaced, and the new one gets the
 * unanswered requests again; the records the dead one had journaled it takes over from the journal.
 * The worker holds the process open only while requests wait, as the queue's timer did in process.
 */
export class WarehouseThread implements RecordQueue {
  /** Settles once the first worker is ready; rejects if it cannot start (say, an unusable journal). */
  readonly ready: Promise<void>;
  private worker: Worker | undefined;
  private readonly unanswered = new Map<number, { request: WorkerRequest; answered: () => void }>();
  private nextId = 0;
  /** The records of this turn, posted together at its end. */
  private batch: Batch | undefined;
  private startedOnce = false;
  private closing: Promise<void> | undefined;
  private stopped = false;
  private failedStartsWhileClosing = 0;

  /** `connect` gives each worker started a message port to the store (LocalStore.connect). */
  constructor(
    private readonly data: Omit<WarehouseWorkerData, "storePort">,
    private readonly logger: Logger,
    private readonly connect?: () => MessagePort,
  ) {
    this.ready = this.spawn().then(
      () => {
        this.startedOnce = true;
      },
      (err: unknown) => {
        // The stack does not start: no record was handed over, only deliveries wait, with nothing to do.
        this.stopped = true;
        for (const id of [...this.unanswered.keys()]) this.answer(id);
        throw err;
      },
    );
  }

  send(record: InteractionRecord): Promise<void> {
    if (this.stopped) {
      this.logger.error("a record came after the warehouse closed; it is not written", {
        metric: "warehouse.undelivered",
        count: 1,
      });
      return Promise.resolve();
    }
    this.batch ??= this.newBatch();
    this.batch.bodies.push(JSON.stringify(record));
    return this.batch.answered;
  }

  /** A batch posted at the end of this turn, or before a delivery or the close asked for meanwhile. */
  private newBatch(): Batch {
    const bodies: string[] = [];
    let post = () => {};
    const answered = new Promise<void>((resolve) => {
      post = () => {
        if (this.batch?.bodies !== bodies) return; // posted already
        this.batch = undefined;
        resolve(this.request((id) => ({ type: "send", id, bodies })));
      };
    });
    setImmediate(post);
    return { bodies, answered, post };
  }

  /** Delivers every record handed over so far (and visible); resolves once they are written. */
  deliver(): Promise<void> {
    this.batch?.post();
    return this.request((id) => ({ type: "deliver", id }));
  }

  /** Delivers everything, closes the journal, and ends the worker. */
  close(): Promise<void> {
    this.batch?.post();
    this.closing ??= this.request((id) => ({ type: "close", id })).then(async () => {
      this.stopped = true;
      await this.worker?.terminate();
    });
    return this.closing;
  }

  /**
   * Closing, with no worker able to start: ends without one rather than holding the shutdown forever.
   * Records already journaled wait in the journal for the next start; those not yet are lost, counted.
   */
  private giveUp(): void {
    this.stopped = true;
    let lost = 0;
    for (const { request } of this.unanswered.values())
      if (request.type === "send") lost += request.bodies.length;
    this.logger.error("the warehouse worker cannot start; closing without it", {
      metric: "warehouse.undelivered",
      count: lost,
    });
    for (const id of [...this.unanswered.keys()]) this.answer(id);
  }

  /** The records posted and not yet answered. */
  private recordsWaiting(): number {
    let count = 0;
    for (const { request } of this.unanswered.values())
      if (request.type === "send") count += request.bodies.length;
    return count;
  }

  private request(make: (id: number) => WorkerRequest): Promise<void> {
    const request = make(this.nextId++);
    return new Promise((answered) => {
      this.unanswered.set(request.id, { request, answered });
      this.worker?.ref();
      this.worker?.postMessage(request);
    });
  }

  private answer(id: number): void {
    const waiting = this.unanswered.get(id);
    if (!waiting) return;
    this.unanswered.delete(id);
    if (this.unanswered.size === 0) this.worker?.unref();
    waiting.answered();
  }

  /** A new worker, handed the unanswered requests; resolves once it is ready. */
  private spawn(): Promise<void> {
    const storePort = this.connect?.();
    const worker = new Worker(new URL("./warehouse-worker.mjs", import.meta.url), {
      workerData: { ...this.data, ...(storePort ? { storePort } : {}) } satisfies WarehouseWorkerData,
      ...(storePort ? { transferList: [storePort] } : {}),
    });
    this.worker = worker;
    for (const { request } of this.unanswered.values()) worker.postMessage(request);
    let ready = false;
    let failure: Error | undefined;
    return new Promise((resolve, reject) => {
      worker.on("message", (report: WorkerReport) => {
        if (report.type === "log") this.logger[report.level](report.message, report.fields);
        else if (report.type === "done") this.answer(report.id);
        else {
          ready = true;
          if (this.unanswered.size === 0) worker.unref();
          resolve();
        }
      });
      worker.on("error", (err) => {
        failure = err;
        this.logger.error("the warehouse worker failed", errorFields(err));
      });
      worker.once("exit", (code) => {
        if (this.stopped) return;
        if (!ready) {
          const reason = failure?.message ?? `it exited with code ${code}`;
          reject(new Error(`The warehouse worker did not start (${reason}).`, { cause: failure }));
        }
        // A worker that fails at the first start fails the stack's start instead.
        if (!this.startedOnce) return;
        if (this.closing && !ready && ++this.failedStartsWhileClosing >= STARTS_WHILE_CLOSING) {
          this.giveUp();
          return;
        }
        this.logger.error("the warehouse worker stopped; a new one takes over its records", {
          metric: "warehouse.worker_restarted",
          waiting: this.recordsWaiting(),
        });
        // A worker that failed before it was ready gets a new one after a pause; its exit comes here again.
        const restart = setTimeout(
          () => void this.spawn().catch(() => undefined),
          ready ? 0 : RESTART_PAUSE_MS,
        );
        if (this.unanswered.size === 0) restart.unref();
      });
    });
  }
}

export interface ThreadedWarehouseOptions {
  dataDir: string;
  logger: Logger;
  flushIntervalMs: number;
  /** The billing exports' settings; absent: no billing system is configured. */
  meter?: MeterConfig;
  /**
   * The local store: the worker reaches it over a port from `connect` if there is one, else at
   * `endpoint`; deletion requests run here through `db`.
   */
  store: {
    endpoint: string;
    dynalite: boolean;
    connect?: () => MessagePort;
    db: DynamoDBClient;
    tables: TableNames;
  };
  /** More copies a deletion purges (the dashboard's interaction index and rollups). */
  purgers: CopyPurger[];
  /** Where a finished deletion's `deletion.completed` goes. */
  events?: EventPublisher;
}

export interface ThreadedWarehouse extends WarehouseReads {
  /** Where the proxy's after-hook sends records. */
  queue: WarehouseThread;
  /** Lets a deletion in progress end, releases DuckDB, delivers every waiting record, ends the worker. */
  close(): Promise<void>;
}

/** The local stack's warehouse: the writing side in the worker, exports and deletion in this thread. */
export async function startThreadedWarehouse(options: ThreadedWarehouseOptions): Promise<ThreadedWarehouse> {
  const { endpoint, dynalite, db, tables, connect } = options.store;
  const queue = new WarehouseThread(
    {
      dataDir: options.dataDir,
      endpoint,
      dynalite,
      tables,
      flushIntervalMs: options.flushIntervalMs,
      ...(options.meter && { meter: options.meter }),
    },
    options.logger,
    connect,
  );
  // The worker starts while DuckDB opens here.
  const [reads, started] = await Promise.allSettled([
    openWarehouseReads(
      {
        dataDir: options.dataDir,
        logger: options.logger,
        deletion: {
          db,
          tables,
          purgers: options.purgers,
          ...(options.events ? { events: options.events } : {}),
        },
      },
      queue,
    ),
    queue.ready,
  ]);
  if (reads.status === "rejected") {
    if (started.status === "fulfilled") await queue.close();
    throw reads.reason;
  }
  if (started.status === "rejected") {
    await reads.value.close();
    throw started.reason;
  }
  return {
    ...reads.value,
    queue,
    async close() {
      await reads.value.close();
      await queue.close();
    },
  };
}

/**
 * The worker's side (its entry, lambda/local/warehouse-worker.mjs, calls this): the in-process queue
 * with its journal, the consumer Lambda runs (Parquet files, the delivery ledger, dead letters), and the
 * dashboard's index and rollups, written through a store client of its own.
 */
export async function runWarehouseWorker(): Promise<void> {
  const port = parentPort;
  if (!port) throw new Error("the warehouse worker runs in a worker thread");
  const data = workerData as WarehouseWorkerData;
  const report = (message: WorkerReport) => port.postMessage(message);

  // Log lines go to the server's logger, which filters and writes them.
  const logger = loggerOver((level, message, fields) =>
    report({ type: "log", level, message, ...(fields ? { fields } : {}) }),
  );

  const db = storeClient(data.endpoint, data.dynalite, data.storePort);
  // The consumer's copies in the store, as in AWS: tombstones, the dashboard's index and rollups.
  const store = new DynamoPorts(db, data.tables, () => {
    throw new Error("the warehouse worker unwraps no vendor keys");
  });
  // Billing exports: the consumer's listener queues each billable call; the meter queue sends them.
  // Loaded here only: the server's thread imports this module too, and needs no Stripe SDK.
  const { startLocalMeter } = await import("./billing");
  const meter = await startLocalMeter({
    dataDir: data.dataDir,
    db,
    tables: data.tables,
    logger,
    config: data.meter ?? { DMT_METER_SOURCE: "dmt" },
  });
  const copies = storeCopies({ store });
  const queue = await startWarehouseQueue({
    dataDir: data.dataDir,
    logger,
    flushIntervalMs: data.flushIntervalMs,
    ...copies,
    onWritten: [...copies.onWritten, meter.listener],
  });

  /** Records on their way into the journal: a delivery, and the close, wait for them. */
  const arriving = new Set<Promise<void>>();
  const arrived = () => Promise.all(arriving);

  // A request that fails is an unhandled rejection: the worker ends, the server logs it and starts another.
  port.on("message", (request: WorkerRequest) => {
    const done = () => report({ type: "done", id: request.id });
    if (request.type === "send") {
      const sent = Promise.all(request.bodies.map((body) => queue.enqueue(body))).then(done);
      arriving.add(sent);
      void sent.finally(() => arriving.delete(sent));
    } else if (request.type === "deliver") {
      void arrived()
        .then(() => queue.deliver())
        .then(done);
    } else {
      void arrived()
        .then(() => queue.close())
        .then(() => meter.queue.stop())
        .then(() => {
          db.destroy();
          done();
        });
    }
  });
  report({ type: "ready" });
}
