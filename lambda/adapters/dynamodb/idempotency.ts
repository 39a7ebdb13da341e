import { randomUUID } from "node:crypto";
import {
  ConditionalCheckFailedException,
  DeleteItemCommand,
  type DynamoDBClient,
  PutItemCommand,
  UpdateItemCommand,
} from "@aws-sdk/client-dynamodb";
import { marshall } from "@aws-sdk/util-dynamodb";
import {
  type BeginOutcome,
  IDEMPOTENCY_LEASE_MS,
  IDEMPOTENCY_WINDOW_MS,
  type IdempotencyStore,
  MAX_REPLAY_BYTES,
  type StoredResponse,
} from "../../core/idempotency";
import { readItem } from "./paging";
import type { TableNames } from "./tables";

/**
 * X-Request-ID records over DynamoDB. The record `<keyId>:<requestId>` is created in flight with a
 * random lease id; whoever creates it runs the call, and only the lease holder may complete or abandon
 * it. Expiry (24 h) and the lease are checked against stored times on every read and in the create
 * condition, never left to TTL (`gcAt` only lets DynamoDB collect old items).
 *
 * An item is at most 400 KB, so a response is stored in parts of PART_BYTES: the first in the record
 * itself, the others in items `<recordId>#<leaseId>#<n>` written before the record is marked complete
 * (a lease that lost its record can never overwrite the parts of the one that took it over). Up to
 * MAX_REPLAY_BYTES in all; a larger response is remembered as completed but not replayable. A stream's
 * chunk boundaries are kept (at most MAX_CHUNKS, adjacent chunks merged beyond that).
 */

const PART_BYTES = 256 * 1024;
const MAX_CHUNKS = 4096;
const MAX_HEADER_BYTES = 16 * 1024;

interface RecordItem {
  recordId: string;
  fingerprint: string;
  phase: "running" | "completed";
  leaseId: string;
  leaseUntil: number;
  expiresAt: number;
  gcAt: number;
  httpStatus?: number;
  headers?: string;
  body?: Uint8Array;
  parts?: number;
  lengths?: number[];
  replayable?: boolean;
}

export class DynamoIdempotency implements IdempotencyStore {
  constructor(
    private readonly db: DynamoDBClient,
    private readonly tables: Pick<TableNames, "idempotency">,
    private readonly clock: () => number = Date.now,
  ) {}

  async begin(keyId: string, requestId: string, fingerprint: string): Promise<BeginOutcome> {
    const recordId = `${keyId}:${requestId}`;
    // A record that expires or is abandoned between our write and our read makes us try once more.
    for (let attempt = 0; attempt < 3; attempt++) {
      const now = this.clock();
      // From a cached pool of entropy: randomBytes(16) took ~4 µs a call on the server's main thread.
      const leaseId = randomUUID();
      const record: RecordItem = {
        recordId,
        fingerprint,
        phase: "running",
        leaseId,
        leaseUntil: now + IDEMPOTENCY_LEASE_MS,
        expiresAt: now + IDEMPOTENCY_WINDOW_MS,
        gcAt: gcAt(now),
      };
      try {
        await this.db.send(
          new PutItemCommand({
            TableName: this.tables.idempotency,
            Item: marshall(record),
            ConditionExpression:
              "attribute_not_exists(recordId) OR expiresAt <= :now" +
              " OR (phase = :running AND leaseUntil <= :now AND fingerprint = :fp)",
            ExpressionAttributeValues: marshall({ ":now": now, ":running": "running", ":fp": fingerprint }),
          }),
        );
        return { kind: "new", token: leaseId };
      } catch (err) {
        if (!(err instanceof ConditionalCheckFailedException)) throw err;
      }
      const found = await this.read(recordId);
      if (!found || found.expiresAt <= now) continue;
      if (found.fingerprint !== fingerprint) return { kind: "mismatch" };
      if (found.phase === "running") {
        if (found.leaseUntil <= now) continue;
        return { kind: "in_progress" };
      }
      return found.replayable
        ? { kind: "completed", response: await this.response(found) }
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
    const recordId = `${keyId}:${requestId}`;
    const { body, lengths } = joinChunks(response.chunks);
    const headers = JSON.stringify(response.headers);
    const replayable = body.length <= MAX_REPLAY_BYTES && Buffer.byteLength(headers) <= MAX_HEADER_BYTES;
    const parts: Uint8Array[] = [];
    if (replayable)
      for (let at = 0; at < body.length; at += PART_BYTES) parts.push(body.subarray(at, at + PART_BYTES));
    const gc = gcAt(this.clock());
    await Promise.all(
      parts.slice(1).map((part, i) =>
        this.db.send(
          new PutItemCommand({
            TableName: this.tables.idempotency,
            Item: marshall({ recordId: partId(recordId, token, i + 1), body: part, gcAt: gc }),
          }),
        ),
      ),
    );
    const stored: Record<string, unknown> = { phase: "completed", replayable, httpStatus: response.status };
    if (replayable) Object.assign(stored, { headers, parts: parts.length, lengths });
    // An empty body has no part: DynamoDB keeps no empty binary values.
    if (parts[0]) stored.body = parts[0];
    const sets: string[] = [];
    const values: Record<string, unknown> = { ":running": "running", ":lease": token };
    for (const [name, value] of Object.entries(stored)) {
      sets.push(`${name} = :${name}`);
      values[`:${name}`] = value;
    }
    try {
      await this.db.send(
        new UpdateItemCommand({
          TableName: this.tables.idempotency,
          Key: marshall({ recordId }),
          UpdateExpression: `SET ${sets.join(", ")}`,
          ConditionExpression: "leaseId = :lease AND phase = :running",
          ExpressionAttributeValues: marshall(values),
        }),
      );
      return true;
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) return false;
      throw err;
    }
  }

  async abandon(keyId: string, requestId: string, token: string): Promise<void> {
    try {
      await this.db.send(
        new DeleteItemCommand({
          TableName: this.tables.idempotency,
          Key: marshall({ recordId: `${keyId}:${requestId}` }),
          ConditionExpression: "leaseId = :lease AND phase = :running",
          ExpressionAttributeValues: marshall({ ":lease": token, ":running": "running" }),
        }),
      );
    } catch (err) {
      if (!(err instanceof ConditionalCheckFailedException)) throw err;
    }
  }

  private async response(record: RecordItem): Promise<StoredResponse> {
    const rest = await Promise.all(
      Array.from({ length: Math.max(0, (record.parts ?? 0) - 1) }, async (_, i) => {
        const part = await this.read(partId(record.recordId, record.leaseId, i + 1));
        if (!part?.body) throw new Error(`Part ${i + 1} of a stored response is missing.`);
        return part.body;
      }),
    );
    const body = Buffer.concat([record.body ?? new Uint8Array(), ...rest]);
    return {
      status: record.httpStatus ?? 200,
      headers: JSON.parse(record.headers ?? "[]") as [string, string][],
      chunks: splitChunks(body, record.lengths ?? []),
    };
  }

  private async read(recordId: string): Promise<RecordItem | undefined> {
    return (await readItem(this.db, this.tables.idempotency, { recordId })) as RecordItem | undefined;
  }
}

function partId(recordId: string, leaseId: string, n: number): string {
  return `${recordId}#${leaseId}#${n}`;
}

/** A day after the window, in Unix seconds, for DynamoDB TTL. */
function gcAt(now: number): number {
  return Math.ceil((now + 2 * IDEMPOTENCY_WINDOW_MS) / 1000);
}

/** The bytes of all chunks and their lengths, merging neighbours to keep at most MAX_CHUNKS. */
function joinChunks(chunks: Uint8Array[]): { body: Buffer; lengths: number[] } {
  const group = Math.ceil(chunks.length / MAX_CHUNKS);
  const lengths: number[] = [];
  for (let i = 0; i < chunks.length; i += group) {
    lengths.push(chunks.slice(i, i + group).reduce((sum, chunk) => sum + chunk.length, 0));
  }
  return { body: Buffer.concat(chunks), lengths };
}

function splitChunks(body: Buffer, lengths: number[]): Uint8Array[] {
  const chunks: Uint8Array[] = [];
  let at = 0;
  for (const length of lengths) {
    chunks.push(new Uint8Array(body.subarray(at, at + length)));
    at += length;
  }
  return chunks;
}
