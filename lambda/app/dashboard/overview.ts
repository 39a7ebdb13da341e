import type { CreditStore } from "../../core/credits";
import { dayOf, startOfDay } from "../../core/interactions";
import { buildOverview, overviewSince } from "../../core/overview";
import type { UsageRollups } from "../../core/usage-rollups";
import type { RouteTable } from "../routing";
import { projectOf } from "./requests";

export interface OverviewRoutesDeps {
  usage: UsageRollups;
  credits: Pick<CreditStore, "balance">;
  clock: () => number;
}

/** The overview page's figures: daily rollups (never the warehouse) and the credit balance. */
export function overviewRoutes(base: string, deps: OverviewRoutesDeps): RouteTable {
  return {
    [`${base}/overview`]: {
      GET: async (c) => {
        const now = deps.clock();
        const projectId = projectOf(c);
        const [rollups, balance] = await Promise.all([
          deps.usage.query(projectId, overviewSince(now), dayOf(startOfDay(now))),
          deps.credits.balance(projectId),
        ]);
        return c.json(buildOverview(rollups, balance, now));
      },
    },
  };
}
