import type { BreakdownDimension, BreakdownRow } from "./breakdowns";
import type { Rollup } from "./interactions-usage";

/** The rollups port: DynamoDB implements it (adapters/dynamodb/rollups.ts). */
export interface UsageRollups {
  /** The project's rollups of the UTC days `from` to `to`, both included. */
  query(projectId: string, from: string, to: string): Promise<Rollup[]>;
  /** The project's rows by key or by user (core/breakdowns.ts) of those days. */
  breakdown(
    projectId: string,
    dimension: BreakdownDimension,
    from: string,
    to: string,
  ): Promise<BreakdownRow[]>;
}
