import { randomUUID } from "node:crypto";
import { errorFields, type Logger } from "../../core/logger";
import type { ObjectStore } from "../../core/object-store";

export const SPOOL_PREFIX = "queue-spool/";

/**
 * Where spooled records are kept. Spooling only writes new objects (all a producer may do: the proxy
 * functions write with a signed PUT, without an S3 client); re-sending also lists, reads and removes.
 */
export type SpoolObjects = ObjectStore | Pick<ObjectStore, "put">;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * Records the queue would not take, kept as JSON-lines objects in the object store until a re-send
 * succeeds. Counters are exported as metrics (structured log lines) so spooling is never silent.
 */
export class RecordSpool {
  /** Records spooled by this process. */
  spooled = 0;
  /** Records re-sent from the spool by this process. */
  resent = 0;

  constructor(
    private readonly objects: SpoolObjects,
    private readonly logger: Logger,
    private readonly clock: () => number = Date.now,
  ) {}

  /** Keeps message bodies for a later re-send. If even that fails, the loss is logged with the record ids. */
  async put(bodies: string[]): Promise<void> {
    if (bodies.length === 0) return;
    const stamp = new Date(this.clock()).toISOString().replace(/[-:.]/g, "");
    try {
      await this.objects.put(
        `${SPOOL_PREFIX}${stamp}-${randomUUID()}.jsonl`,
        encoder.encode(bodies.join("\n")),
      );
      this.spooled += bodies.length;
      this.logger.warn("records spooled after failed sends", {
        metric: "queue.spooled",
        count: bodies.length,
      });
    } catch (err) {
      this.logger.error("records lost: neither queue nor spool took them", {
        ...errorFields(err),
        metric: "queue.lost",
        count: bodies.length,
        transaction_ids: bodies.map(transactionIdOf),
      });
    }
  }

  /**
   * Offers every spooled record to `send`, which returns the bodies it could not deliver. A spool object
   * is removed once all of its records went out, or rewritten with the ones that did not.
   */
  async resend(send: (bodies: string[]) => Promise<string[]>): Promise<void> {
    const objects = this.objects;
    if (!("list" in objects)) throw new Error("This spool only writes; the spool re-sender reads it.");
    for await (const object of objects.list(SPOOL_PREFIX)) {
      const bytes = await objects.get(object.key);
      if (!bytes) continue;
      const bodies = decoder.decode(bytes).split("\n").filter(Boolean);
      const left = await send(bodies);
      if (left.length === 0) await objects.delete(object.key);
      else await objects.put(object.key, encoder.encode(left.join("\n")));
      const sent = bodies.length - left.length;
      this.resent += sent;
      if (sent > 0) this.logger.info("spooled records re-sent", { metric: "queue.resent", count: sent });
    }
  }
}

function transactionIdOf(body: string): string | undefined {
  try {
    return (JSON.parse(body) as { transaction_id?: string }).transaction_id;
  } catch {
    return undefined;
  }
}
