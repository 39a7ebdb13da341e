import type * as z from "zod/mini";
import { type BudgetStore, budgetViews, EVERY_USER } from "../../core/budgets";
import { errors } from "../../core/errors";
import type { RouteTable } from "../routing";
import type { budgetListSchema } from "./openapi";

const USER_ID_MAX = 256;

/**
 * `GET /api/v1/budgets`: the budgets that apply to the calling key (its project's, its own, and the
 * end users'), each with the spend and holds of its current window. `?user=<id>` narrows the end-user
 * budgets to that user and gives the spend of a budget of each user for that user. A key budget, the
 * caller's own, has the key's name beside its id (`key_name`, as `dmt budgets list` shows it).
 */
export function budgetRoutes(budgets: BudgetStore, clock: () => number = Date.now): RouteTable {
  return {
    "/api/v1/budgets": {
      GET: async (c) => {
        const { projectId, keyId, keyName } = c.get("auth");
        const user = c.req.query("user");
        if (user !== undefined && (user.length === 0 || user.length > USER_ID_MAX)) {
          throw errors.invalidField("user", `must be 1 to ${USER_ID_MAX} characters`);
        }
        const now = clock();
        const applying = (await budgets.list(projectId)).filter(
          (b) =>
            b.scope === "project" ||
            (b.scope === "key" && b.subject === keyId) ||
            (b.scope === "user" && (user === undefined || b.subject === user || b.subject === EVERY_USER)),
        );
        const views = await budgetViews(budgets, applying, now, user ?? null);
        // The only key budget listed is the caller's: its name comes with the caller's identity.
        const data = views.map((view) =>
          view.key === undefined || keyName === undefined ? view : { ...view, key_name: keyName },
        );
        return c.json({ object: "list", data } satisfies z.infer<typeof budgetListSchema>);
      },
    },
  };
}
