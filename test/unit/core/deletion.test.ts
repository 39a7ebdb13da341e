import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { syntheticRecord } from "../../../bench/warehouse-records";
import {
  DELETION_MAX_TRANSACTION_IDS,
  DELETION_MAX_USER_ID_LENGTH,
  deletionMatcher,
  hashUserId,
  isDeletionRequestId,
  newDeletionRequest,
  parseDeletionRequest,
  targetOf,
  tombstoneMatcher,
  tombstoneOf,
} from "../../../lambda/core/deletion";
import { ApiError } from "../../../lambda/core/errors";

function refusal(body: Record<string, unknown>): { code: string; message: string; status: number } {
  try {
    parseDeletionRequest(body);
  } catch (err) {
    expect(err).toBeInstanceOf(ApiError);
    const e = err as ApiError;
    return { code: e.code, message: e.message, status: e.status };
  }
  throw new Error("accepted");
}

const record = (i: number, user: string | null, startedAt = Date.UTC(2026, 0, 15), projectId = "proj-a") => ({
  ...syntheticRecord(i, { projectId }),
  user_id: user,
  started_at: startedAt,
});

describe("deletion request validation", () => {
  it("accepts a user, transaction ids or both, and drops repeated ids", () => {
    expect(parseDeletionRequest({ user_id: "u1", reason: "GDPR art. 17" })).toEqual({
      userId: "u1",
      reason: "GDPR art. 17",
    });
    expect(parseDeletionRequest({ transaction_ids: ["a", "b", "a"], reason: "r" })).toEqual({
      transactionIds: ["a", "b"],
      reason: "r",
    });
    const longest = "x".repeat(DELETION_MAX_USER_ID_LENGTH);
    expect(parseDeletionRequest({ user_id: longest, transaction_ids: ["t:1"], reason: "r" }).userId).toBe(
      longest,
    );
    const ids = Array.from({ length: DELETION_MAX_TRANSACTION_IDS }, (_, i) => `txn_${i}`);
    expect(parseDeletionRequest({ transaction_ids: ids, reason: "r" }).transactionIds).toHaveLength(1000);
  });

  it.each([
    ["no reason", { user_id: "u1" }, "missing_field", "Missing required field 'reason'."],
    [
      "a reason that is not text",
      { user_id: "u1", reason: 7 },
      "invalid_field",
      "'reason': must be a string.",
    ],
    ["an empty reason", { user_id: "u1", reason: "" }, "invalid_field", "'reason': must not be empty."],
    ["a blank reason", { user_id: "u1", reason: "  \n" }, "invalid_field", "'reason': must not be empty."],
    ["neither user nor ids", { reason: "r" }, "missing_field", "Provide 'user_id' or 'transaction_ids'"],
    ["an empty user id", { user_id: "", reason: "r" }, "invalid_field", "'user_id': must not be empty."],
    [
      "a user id that is not text",
      { user_id: 42, reason: "r" },
      "invalid_field",
      "'user_id': must be a string.",
    ],
    ["a null user id", { user_id: null, reason: "r" }, "invalid_field", "'user_id': must be a string."],
    [
      "a 10 KB user id",
      { user_id: "u".repeat(10_240), reason: "r" },
      "invalid_field",
      "'user_id': must be at most 256 characters.",
    ],
    [
      "ids that are not an array",
      { transaction_ids: "t1", reason: "r" },
      "invalid_field",
      "'transaction_ids': must be an array of strings.",
    ],
    [
      "an empty id list",
      { transaction_ids: [], reason: "r" },
      "invalid_field",
      "'transaction_ids': must hold at least one id.",
    ],
    [
      "too many ids",
      { transaction_ids: Array.from({ length: 1001 }, (_, i) => `t${i}`), reason: "r" },
      "invalid_field",
      "holds 1001 ids; a request names at most 1000.",
    ],
    [
      "an id that is not text",
      { transaction_ids: ["t1", 2], reason: "r" },
      "invalid_field",
      "'transaction_ids[1]': must be a string.",
    ],
    [
      "an empty id",
      { transaction_ids: [""], reason: "r" },
      "invalid_field",
      "'transaction_ids[0]': is not a transaction id",
    ],
    [
      "an id with spaces",
      { transaction_ids: ["a b"], reason: "r" },
      "invalid_field",
      "'transaction_ids[0]': is not a transaction id",
    ],
    [
      "an unknown field",
      { user_id: "u1", reason: "r", userid: "u2" },
      "invalid_field",
      "unknown field 'userid'; allowed: user_id, transaction_ids, reason.",
    ],
  ])("refuses %s with a 400 saying what is wrong", (_, body, code, message) => {
    const r = refusal(body);
    expect(r.status).toBe(400);
    expect(r.code).toBe(code);
    expect(r.message).toContain(message);
  });

  it("never echoes the values it refuses", () => {
    const secret = "s3cret-user-value";
    expect(refusal({ user_id: secret.repeat(40), reason: "r" }).message).not.toContain(secret);
    expect(refusal({ transaction_ids: [`${secret} x`], reason: "r" }).message).not.toContain(secret);
  });
});

describe("requests, targets and tombstones", () => {
  it("records the user as a hash of project and user, and names requests recognisably", () => {
    const request = newDeletionRequest("proj-a", { userId: "u1", reason: "r" }, 1000);
    expect(request.userIdHash).toBe(createHash("sha256").update("proj-a:u1").digest("hex"));
    expect(hashUserId("proj-b", "u1")).not.toBe(request.userIdHash);
    expect(request).toMatchObject({
      status: "queued",
      createdAt: 1000,
      transactionIdCount: 0,
      copiesPurged: 0,
    });
    expect(isDeletionRequestId(request.requestId)).toBe(true);
    expect(isDeletionRequestId(`${request.requestId}#file#x`)).toBe(false);
    expect(tombstoneOf(request)).not.toHaveProperty("userId");
  });

  it("matches the project's rows of the user or the ids, up to the moment of the request", () => {
    const at = Date.UTC(2026, 0, 15, 12);
    const request = newDeletionRequest(
      "proj-a",
      { userId: "u1", transactionIds: ["txn_proj-a_5"], reason: "r" },
      at,
    );
    const matches = deletionMatcher(targetOf(request));
    expect(matches(record(1, "u1", at))).toBe(true);
    expect(matches(record(2, "u1", at + 1))).toBe(false); // a later call is new data
    expect(matches(record(3, "u2", at))).toBe(false);
    expect(matches(record(4, null, at))).toBe(false);
    expect(matches(record(5, "u2", at))).toBe(true); // by id
    expect(matches(record(6, "u1", at, "proj-b"))).toBe(false); // another project's u1
  });

  it("tombstones match the same records, without holding the user id", () => {
    const at = Date.UTC(2026, 0, 15, 12);
    const a = tombstoneOf(newDeletionRequest("proj-a", { userId: "u1", reason: "r" }, at));
    const b = tombstoneOf(
      newDeletionRequest("proj-b", { transactionIds: ["txn_proj-b_2"], reason: "r" }, at),
    );
    expect(JSON.stringify(a)).not.toContain('"u1"');
    const covered = tombstoneMatcher([a, b]);
    expect(covered(record(1, "u1", at))).toBe(true);
    expect(covered(record(1, "u1", at + 1))).toBe(false);
    expect(covered(record(1, "u1", at, "proj-b"))).toBe(false);
    expect(covered(record(2, "u9", at, "proj-b"))).toBe(true);
    expect(covered(record(3, "u9", at, "proj-c"))).toBe(false);
    expect(tombstoneMatcher([])(record(1, "u1", at))).toBe(false);
  });
});
