import { describe, expect, it } from "vitest";
import { athenaDeletionLiteral } from "../../../../lambda/adapters/athena/deletion-query";
import { buildDeletionCondition } from "../../../../lambda/adapters/sql/deletion-condition";
import { hashUserId } from "../../../../lambda/core/deletion";

describe("the queries' condition", () => {
  const target = {
    projectId: "proj-a",
    userIdHash: hashUserId("proj-a", "o'brien"),
    transactionIds: ["t1", "t2"],
    upTo: Date.UTC(2026, 0, 15, 12, 0, 0, 250),
  };

  it("binds every value and never the user id itself", () => {
    const duck = buildDeletionCondition(target, "duckdb");
    expect(duck.where).toBe(
      `"project" = ? AND "project_id" = ? AND epoch_ms("started_at") <= ? AND (("user_id" IS NOT NULL AND ` +
        `sha256(concat("project_id", ':', "user_id")) IN (?)) OR "transaction_id" IN (?, ?))`,
    );
    expect(duck.params.map((p) => p.value)).toEqual([
      "proj-a",
      "proj-a",
      target.upTo,
      target.userIdHash,
      "t1",
      "t2",
    ]);
    const athena = buildDeletionCondition(target, "athena");
    expect(athena.where).toContain(`"started_at" <= ?`);
    expect(athena.where).toContain(
      `lower(to_hex(sha256(to_utf8(concat("project_id", ':', "user_id"))))) IN (?)`,
    );
    expect(JSON.stringify(athena)).not.toContain("brien");
    expect(athena.params.map(athenaDeletionLiteral)).toEqual([
      "'proj-a'",
      "'proj-a'",
      "TIMESTAMP '2026-01-15 12:00:00.250'",
      `'${target.userIdHash}'`,
      "'t1'",
      "'t2'",
    ]);
  });

  it("with only ids, matches on ids alone", () => {
    const built = buildDeletionCondition({ ...target, userIdHash: undefined }, "duckdb");
    expect(built.where).toMatch(/AND \("transaction_id" IN \(\?, \?\)\)$/);
  });
});
