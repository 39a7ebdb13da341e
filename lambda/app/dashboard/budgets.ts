import { z } from "zod";
import { updateKey } from "../../core/accounts";
import {
  type BudgetStore,
  budgetView,
  budgetViews,
  parseModels,
  projectOfBudget,
  setBudget,
} from "../../core/budgets";
import { errors } from "../../core/errors";
import type { Store } from "../../core/ports";
import type { UsageRollups } from "../../core/usage-rollups";
import { readJsonObject } from "../body";
import type { RouteTable } from "../routing";
import { parseBody, projectOf } from "./requests";

export interface BudgetRoutesDeps {
  store: Store;
  budgets: BudgetStore;
  clock: () => number;
  /** The models of the price catalogue, for the warning about globs that match none. */
  catalogueModels: readonly string[];
  /** The daily rollups: a budget set mid-window starts from what its scope spent in it already. */
  usage?: Pick<UsageRollups, "breakdown">;
}

const BODY_LIMIT = 16 * 1024;
const KEY_ID = /^[a-z0-9]{16}$/;

const budgetBody = z.strictObject({
  keyId: z.string().optional(),
  userId: z.string().optional(),
  usd: z.string(),
  window: z.string(),
  soft: z.boolean().optional(),
  includeByok: z.boolean().optional(),
});

const policyBody = z.strictObject({
  /** Comma-separated names or globs; `*` allows every model. */
  models: z.string().optional(),
  /** 0 removes the limit. */
  tpm: z.number().int().optional(),
});

/**
 * The Budgets page and the key dialog's policies: the same validation as `dmt budgets set` and
 * `dmt keys update` (core/budgets.ts, core/accounts.ts).
 */
export function budgetRoutes(base: string, deps: BudgetRoutesDeps): RouteTable {
  return {
    [`${base}/budgets`]: {
      GET: async (c) => {
        const projectId = projectOf(c);
        const budgets = await deps.budgets.list(projectId);
        return c.json({ budgets: await budgetViews(deps.budgets, budgets, deps.clock()) });
      },
      // Sets the budget of that scope, subject and window: creates it, or changes its limit and flags.
      PUT: async (c) => {
        const input = parseBody(budgetBody, await readJsonObject(c, BODY_LIMIT));
        // Another project's key reads as one that does not exist: no answer tells its id is taken.
        if (input.keyId !== undefined && KEY_ID.test(input.keyId)) {
          const key = await deps.store.getKey(input.keyId);
          if (key?.projectId !== projectOf(c)) throw errors.notFound(`Key '${input.keyId}' was not found.`);
        }
        const now = deps.clock();
        const budget = await setBudget(
          deps.store,
          deps.budgets,
          { projectId: projectOf(c), ...input },
          now,
          deps.usage,
        );
        return c.json({ budget: budgetView(budget, now) });
      },
    },
    [`${base}/budgets/:budgetId`]: {
      DELETE: async (c) => {
        const budgetId = c.req.param("budgetId") ?? "";
        if (projectOfBudget(budgetId) !== projectOf(c) || !(await deps.budgets.delete(budgetId))) {
          throw errors.notFound(`Budget '${budgetId}' was not found.`);
        }
        return c.json({ deleted: budgetId });
      },
    },
    [`${base}/keys/:keyId/policy`]: {
      PUT: async (c) => {
        const keyId = c.req.param("keyId") ?? "";
        const input = parseBody(policyBody, await readJsonObject(c, BODY_LIMIT));
        const existing = KEY_ID.test(keyId) ? await deps.store.getKey(keyId) : undefined;
        if (!existing || existing.projectId !== projectOf(c))
          throw errors.notFound(`Key '${keyId}' was not found.`);
        const { record, warnings } = await updateKey(
          deps.store,
          keyId,
          {
            ...(input.models !== undefined ? { models: parseModels(input.models) } : {}),
            ...(input.tpm !== undefined ? { tpm: input.tpm } : {}),
          },
          deps.catalogueModels,
        );
        return c.json({ models: record.models ?? null, tpm: record.tpm ?? null, warnings });
      },
    },
  };
}
