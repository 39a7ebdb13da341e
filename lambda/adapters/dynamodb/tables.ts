/**
 * The DynamoDB tables, declared once: the local stack creates them in dynalite from this list and the
 * CDK store construct creates them in AWS from it, so the two cannot drift.
 */
export interface TableDefinition {
  partitionKey: string;
  sortKey?: { name: string; type: "S" | "N" };
  indexes?: { name: string; partitionKey: string; sortKey: { name: string; type: "S" | "N" } }[];
  /** Attribute DynamoDB may use to garbage-collect items in AWS; correctness never depends on it. */
  ttlAttribute?: string;
}

export type TableName = "projects" | "keys";

export const TABLES: Record<TableName, TableDefinition> = {
  projects: { partitionKey: "projectId" },
  keys: {
    partitionKey: "keyId",
    indexes: [{ name: "byProject", partitionKey: "projectId", sortKey: { name: "createdAt", type: "N" } }],
  },
};
export type TableNames = Record<TableName, string>;

/** Physical names: `DMT_TABLE_<NAME>` where set (CDK sets them), else `<prefix><name>`. */
export function tableNames(env: Record<string, string | undefined>, prefix = "dmt-"): TableNames {
  const names = {} as TableNames;
  for (const name of Object.keys(TABLES) as TableName[]) {
    names[name] = env[`DMT_TABLE_${name.toUpperCase()}`] ?? `${prefix}${name}`;
  }
  return names;
}
