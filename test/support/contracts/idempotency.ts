import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  IDEMPOTENCY_LEASE_MS,
  IDEMPOTENCY_WINDOW_MS,
  type IdempotencyStore,
  idempotencyError,
  MAX_REPLAY_BYTES,
  requestFingerprint,
  type StoredResponse,
} from "../../../lambda/core/idempotency";

export interface IdempotencyUnderTest {
  /** The store of one process. */
  store: IdempotencyStore;
  /** The store of another process on the same records. */
  another(): IdempotencyStore;
  close(): Promise<void>;
}

const T0 = 1_700_000_000_000;

/**
 * The cases every adapter of the idempotency port (`core/idempotency.ts`) must pass: one call per
 * request id runs, its response is replayed byte for byte, expiry and leases by the clock given to
 * `make`, never by a timer.
 */
export function idempotencyContract(
  name: string,
  make: (clock: () => number) => Promise<IdempotencyUnderTest>,
): void {
  describe(`idempotency contract: ${name}`, () => {
    let now = T0;
    const clock = () => now;
    let subject: IdempotencyUnderTest;
    beforeAll(async () => {
      subject = await make(clock);
    });
    afterAll(() => subject.close());

    const encoder = new TextEncoder();
    const response = (body: string, chunks = 1): StoredResponse => {
      const bytes = encoder.encode(body);
      const size = Math.ceil(bytes.length / chunks);
      return {
        status: 200,
        headers: [
          ["content-type", "application/json"],
          ["set-cookie", "a=1"],
          ["set-cookie", "b=2"],
        ],
        chunks: Array.from({ length: chunks }, (_, i) => bytes.subarray(i * size, (i + 1) * size)),
      };
    };
    const fingerprint = (body: string) =>
      requestFingerprint("POST", "/openai/v1/chat/completions", encoder.encode(body));
    let ids = 0;
    const newRequestId = () => `req-${++ids}`;

    it("new, then in progress, mismatch for another body, then the stored response", async () => {
      now = T0;
      const store = subject.store;
      const id = newRequestId();
      const begun = await store.begin("key1", id, fingerprint("a"));
      expect(begun.kind).toBe("new");
      if (begun.kind !== "new") return;
      expect(await store.begin("key1", id, fingerprint("a"))).toEqual({ kind: "in_progress" });
      expect(await store.begin("key1", id, fingerprint("b"))).toEqual({ kind: "mismatch" });
      // Another key's id space is its own.
      expect((await store.begin("key2", id, fingerprint("b"))).kind).toBe("new");

      const sent = response('{"id":"chatcmpl-1","choices":[]}');
      expect(await store.complete("key1", id, begun.token, sent)).toBe(true);
      expect(await store.begin("key1", id, fingerprint("a"))).toEqual({ kind: "completed", response: sent });
      expect(await subject.another().begin("key1", id, fingerprint("a"))).toEqual({
        kind: "completed",
        response: sent,
      });
      expect(await store.begin("key1", id, fingerprint("b"))).toEqual({ kind: "mismatch" });
    });

    it("of calls begun at once with one request id, exactly one runs", async () => {
      const id = newRequestId();
      const outcomes = await Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          (i % 2 ? subject.store : subject.another()).begin("key1", id, fingerprint("race")),
        ),
      );
      expect(outcomes.filter((o) => o.kind === "new")).toHaveLength(1);
      expect(outcomes.filter((o) => o.kind === "in_progress")).toHaveLength(7);
    });

    it("replays a stream chunk by chunk, and an empty body", async () => {
      const store = subject.store;
      const id = newRequestId();
      const begun = await store.begin("key1", id, fingerprint("s"));
      if (begun.kind !== "new") throw new Error(begun.kind);
      const stream: StoredResponse = {
        status: 200,
        headers: [["content-type", "text/event-stream"]],
        chunks: ['data: {"a":1}\n\n', 'data: {"b":2}\n\n', "data: [DONE]\n\n"].map((c) => encoder.encode(c)),
      };
      await store.complete("key1", id, begun.token, stream);
      expect(await store.begin("key1", id, fingerprint("s"))).toEqual({
        kind: "completed",
        response: stream,
      });

      const emptyId = newRequestId();
      const empty = await store.begin("key1", emptyId, fingerprint(""));
      if (empty.kind !== "new") throw new Error(empty.kind);
      const noBody: StoredResponse = { status: 204, headers: [], chunks: [] };
      await store.complete("key1", emptyId, empty.token, noBody);
      expect(await store.begin("key1", emptyId, fingerprint(""))).toEqual({
        kind: "completed",
        response: noBody,
      });
    });

    it("stores a response beyond one item's 400 KB in parts, and merges a flood of chunks", async () => {
      const store = subject.store;
      const id = newRequestId();
      const begun = await store.begin("key1", id, fingerprint("big"));
      if (begun.kind !== "new") throw new Error(begun.kind);
      const bytes = randomBytes(1_500_000);
      const chunks = Array.from(
        { length: 6000 },
        (_, i) => new Uint8Array(bytes.subarray(i * 250, (i + 1) * 250)),
      );
      await store.complete("key1", id, begun.token, { status: 200, headers: [], chunks });
      const replay = await store.begin("key1", id, fingerprint("big"));
      if (replay.kind !== "completed" || !replay.response) throw new Error("no replay");
      expect(Buffer.concat(replay.response.chunks).equals(bytes)).toBe(true);
      expect(replay.response.chunks.length).toBeLessThanOrEqual(4096);
      expect(replay.response.chunks.length).toBeGreaterThan(2000);
    });

    it("remembers a response too large to replay as completed without it", async () => {
      const store = subject.store;
      const id = newRequestId();
      const begun = await store.begin("key1", id, fingerprint("huge"));
      if (begun.kind !== "new") throw new Error(begun.kind);
      const huge = { status: 200, headers: [], chunks: [new Uint8Array(MAX_REPLAY_BYTES + 1)] };
      expect(await store.complete("key1", id, begun.token, huge)).toBe(true);
      const outcome = await store.begin("key1", id, fingerprint("huge"));
      expect(outcome).toEqual({ kind: "completed" });
      if (outcome.kind === "completed") expect(idempotencyError(outcome).status).toBe(409);
    });

    it("expires after 24 hours by the stored time, not by TTL", async () => {
      now = T0;
      const store = subject.store;
      const id = newRequestId();
      const begun = await store.begin("key1", id, fingerprint("a"));
      if (begun.kind !== "new") throw new Error(begun.kind);
      await store.complete("key1", id, begun.token, response("first"));
      now = T0 + IDEMPOTENCY_WINDOW_MS - 1;
      expect((await store.begin("key1", id, fingerprint("a"))).kind).toBe("completed");
      now = T0 + IDEMPOTENCY_WINDOW_MS;
      // Past the window, even another body starts afresh.
      expect((await store.begin("key1", id, fingerprint("b"))).kind).toBe("new");
      now = T0;
    });

    it("lets a retry take over a call whose process died, and the dead one cannot complete it", async () => {
      now = T0;
      const store = subject.store;
      const id = newRequestId();
      const dead = await store.begin("key1", id, fingerprint("a"));
      if (dead.kind !== "new") throw new Error(dead.kind);
      now = T0 + IDEMPOTENCY_LEASE_MS - 1;
      expect((await store.begin("key1", id, fingerprint("a"))).kind).toBe("in_progress");
      now = T0 + IDEMPOTENCY_LEASE_MS;
      // Another body may not take it over: that is still a reused id.
      expect((await store.begin("key1", id, fingerprint("b"))).kind).toBe("mismatch");
      const retry = await store.begin("key1", id, fingerprint("a"));
      if (retry.kind !== "new") throw new Error(retry.kind);

      expect(await store.complete("key1", id, dead.token, response("stale"))).toBe(false);
      expect(await store.complete("key1", id, retry.token, response("fresh"))).toBe(true);
      expect(await store.begin("key1", id, fingerprint("a"))).toEqual({
        kind: "completed",
        response: response("fresh"),
      });
      now = T0;
    });

    it("abandon lets a retry run again; only the lease holder can abandon", async () => {
      const store = subject.store;
      const id = newRequestId();
      const begun = await store.begin("key1", id, fingerprint("a"));
      if (begun.kind !== "new") throw new Error(begun.kind);
      await store.abandon("key1", id, "not-the-lease");
      expect((await store.begin("key1", id, fingerprint("a"))).kind).toBe("in_progress");
      await store.abandon("key1", id, begun.token);
      expect((await store.begin("key1", id, fingerprint("a"))).kind).toBe("new");
    });
  });
}
