import { type PlanStore, projectPlanView } from "../../core/plans";
import type { Ratio } from "../../core/pricing/decimal";
import type { RouteTable } from "../routing";
import { projectOf } from "./requests";

export interface PlanRoutesDeps {
  store: Pick<PlanStore, "getPlan" | "getProjectPlan">;
  /** The deployment's markup: the default plan's. */
  markup: Ratio;
  clock: () => number;
}

/** The project's price plan, read-only for every member (operators change it with the CLI). */
export function planRoutes(base: string, deps: PlanRoutesDeps): RouteTable {
  return {
    [`${base}/credits/plan`]: {
      GET: async (c) => c.json(await projectPlanView(deps.store, projectOf(c), deps.markup, deps.clock())),
    },
  };
}
