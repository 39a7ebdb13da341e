import { randomUUID } from "node:crypto";
import {
  type BeginOutcome,
  IDEMPOTENCY_LEASE_MS,
  IDEMPOTENCY_WINDOW_MS,
  type IdempotencyStore,
  MAX_REPLAY_BYTES,
  type StoredResponse,
} from "../../core/idempotency";
import { MemoryTable } from "./table";

/**
 * X-Request-ID records in memory, by the protocol of adapters/dynamodb/idempotency.ts: the record
 * `<keyId>:<requestId>` is created in flight with a random lease id, by a conditional put that passes
 * only when there is none, it expired, or its lease ended for the same request; only the lease holder
 * completes or abandons it. Expiry and lease are judged by the injected clock on every call. A stream's
 * chunk boundaries are kept (at most MAX_CHUNKS, neighbours merged beyond that), as in DynamoDB.
 */

const MAX_CHUNKS = 4096;
const MAX_HEADER_BYTES = 16 * 1024;

interface RecordItem {
  fingerprint: string;
  phase: "running" | "completed";
  leaseId: string;
  leaseUntil: number;
  expiresAt: number;
  response?: { status: number; headers: string; body: Uint8Array; lengths: number[] };
}

export class MemoryIdempotency implements IdempotencyStore {
  private readonly records = new MemoryTable<RecordItem>();

  constructor(private readonly clock: () => number = Date.now) {}

  async begin(keyId: string, requestId: string, fingerprint: string): Promise<BeginOutcome> {
    const recordId = `${keyId}:${requestId}`;
    for (let attempt = 0; attempt < 3; attempt++) {
      const now = this.clock();
      const leaseId = randomUUID();
      const record: RecordItem = {
        fingerprint,
        phase: "running",
        leaseId,
        leaseUntil: now + IDEMPOTENCY_LEASE_MS,
        expiresAt: now + IDEMPOTENCY_WINDOW_MS,
      };
      const created = await this.records.put(
        recordId,
        record,
        (found) =>
          !found ||
          found.expiresAt <= now ||
          (found.phase === "running" && found.leaseUntil <= now && found.fingerprint === fingerprint),
      );
      if (created) return { kind: "new", token: leaseId };
      const found = await this.records.get(recordId);
      if (!found || found.expiresAt <= now) continue;
      if (found.fingerprint !== fingerprint) return { kind: "mismatch" };
      if (found.phase === "running") {
        if (found.leaseUntil <= now) continue;
        return { kind: "in_progress" };
      }
      return found.response
        ? { kind: "completed", response: replayOf(found.response) }
        : { kind: "completed" };
    }
    throw new Error("The idempotency record kept changing.");
  }

  async complete(
    keyId: string,
    requestId: string,
    token: string,
    response: StoredResponse,
  ): Promise<boolean> {
    const { body, lengths } = joinChunks(response.chunks);
    const headers = JSON.stringify(response.headers);
    const replayable = body.length <= MAX_REPLAY_BYTES && Buffer.byteLength(headers) <= MAX_HEADER_BYTES;
    const completed = await this.records.update(`${keyId}:${requestId}`, (record) => {
      if (!record || record.leaseId !== token || record.phase !== "running") return undefined;
      record.phase = "completed";
      if (replayable) record.response = { status: response.status, headers, body, lengths };
      return record;
    });
    return completed !== undefined;
  }

  async abandon(keyId: string, requestId: string, token: string): Promise<void> {
    await this.records.delete(
      `${keyId}:${requestId}`,
      (record) => record.leaseId === token && record.phase === "running",
    );
  }
}

function replayOf(stored: NonNullable<RecordItem["response"]>): StoredResponse {
  const chunks: Uint8Array[] = [];
  let at = 0;
  for (const length of stored.lengths) {
    chunks.push(stored.body.slice(at, at + length));
    at += length;
  }
  return { status: stored.status, headers: JSON.parse(stored.headers) as [string, string][], chunks };
}

/** The bytes of all chunks and their lengths, merging neighbours to keep at most MAX_CHUNKS. */
function joinChunks(chunks: Uint8Array[]): { body: Uint8Array; lengths: number[] } {
  const group = Math.ceil(chunks.length / MAX_CHUNKS);
  const lengths: number[] = [];
  for (let i = 0; i < chunks.length; i += group) {
    lengths.push(chunks.slice(i, i + group).reduce((sum, chunk) => sum + chunk.length, 0));
  }
  return { body: new Uint8Array(Buffer.concat(chunks)), lengths };
}
