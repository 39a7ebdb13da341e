import { breakdownReport, parseBreakdownQuery } from "../../core/breakdowns";
import { errors } from "../../core/errors";
import {
  type InteractionIndex,
  type InteractionPage,
  parseListQuery,
  parseTransactionId,
  writeCursor,
} from "../../core/interactions";
import { parseUsageRange, usageReport } from "../../core/interactions-usage";
import type { UsageRollups } from "../../core/usage-rollups";
import type { RouteTable } from "../routing";
import { projectOf } from "./requests";

export interface InteractionRoutesDeps {
  interactions: InteractionIndex;
  usage: UsageRollups;
  clock: () => number;
}

/**
 * The Interactions and Usage pages: the recent-interactions index and the daily rollups the warehouse
 * consumer keeps (core/interactions*.ts). Nothing here queries the warehouse.
 */
export function interactionRoutes(base: string, deps: InteractionRoutesDeps): RouteTable {
  return {
    [`${base}/interactions`]: {
      GET: async (c) => {
        const query = parseListQuery(projectOf(c), c.req.queries(), deps.clock());
        const { interactions, next } = await deps.interactions.list(query);
        const page: InteractionPage = { interactions };
        if (next !== undefined) page.cursor = writeCursor(next, query);
        return c.json(page);
      },
    },
    [`${base}/interactions/:transactionId`]: {
      GET: async (c) => {
        const id = parseTransactionId(c.req.param("transactionId") ?? "");
        const interaction = await deps.interactions.get(projectOf(c), id);
        if (!interaction) throw errors.notFound(`Interaction '${id}' was not found.`);
        return c.json({ interaction });
      },
    },
    [`${base}/usage`]: {
      GET: async (c) => {
        const { from, to } = parseUsageRange(c.req.queries(), deps.clock());
        return c.json(usageReport(await deps.usage.query(projectOf(c), from, to), from, to));
      },
    },
    // Usage by key or by end user over the same period (core/breakdowns.ts).
    [`${base}/usage/breakdown`]: {
      GET: async (c) => {
        const { by, from, to } = parseBreakdownQuery(c.req.queries(), deps.clock());
        return c.json(breakdownReport(await deps.usage.breakdown(projectOf(c), by, from, to), by, from, to));
      },
    },
  };
}
