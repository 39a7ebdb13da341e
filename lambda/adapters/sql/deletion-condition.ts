import type { DeletionTarget } from "../../core/deletion";

export type DeletionParam = { type: "string"; value: string } | { type: "time"; value: number };

/**
 * The one condition of a deletion, for both engines, the SQL twin of `deletionMatcher` (core/deletion.ts).
 * Values are `?` parameters. The user is matched by `hashUserId`, computed by the engine, so the user id
 * itself is never a parameter. The engines differ in spelling only: the hash functions, and the time
 * (DuckDB binds epoch ms, Athena a timestamp literal).
 */
export function buildDeletionCondition(
  target: DeletionTarget,
  engine: "duckdb" | "athena",
): { where: string; params: DeletionParam[] } {
  const params: DeletionParam[] = [
    { type: "string", value: target.projectId },
    { type: "string", value: target.projectId },
    { type: "time", value: target.upTo },
  ];
  const matches: string[] = [];
  if (target.userIdHash !== undefined) {
    const hash =
      engine === "duckdb"
        ? `sha256(concat("project_id", ':', "user_id"))`
        : `lower(to_hex(sha256(to_utf8(concat("project_id", ':', "user_id")))))`;
    // Rows of level `none` hold the user's keyed stand-in: its hash matches too.
    const keyed = target.keyedUserIdHash;
    matches.push(`("user_id" IS NOT NULL AND ${hash} IN (?${keyed === undefined ? "" : ", ?"}))`);
    params.push({ type: "string", value: target.userIdHash });
    if (keyed !== undefined) params.push({ type: "string", value: keyed });
  }
  if (target.transactionIds.length > 0) {
    matches.push(`"transaction_id" IN (${target.transactionIds.map(() => "?").join(", ")})`);
    for (const id of target.transactionIds) params.push({ type: "string", value: id });
  }
  // A target always names something (parseDeletionRequest); without, it must match nothing.
  const match = matches.length > 0 ? matches.join(" OR ") : "FALSE";
  const time = engine === "duckdb" ? `epoch_ms("started_at") <= ?` : `"started_at" <= ?`;
  return { where: `"project" = ? AND "project_id" = ? AND ${time} AND (${match})`, params };
}
