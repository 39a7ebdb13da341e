import {
  type BudgetView,
  budgetView,
  budgetViews,
  projectOfBudget,
  setBudget,
} from "../../lambda/core/budgets";
import { errors } from "../../lambda/core/errors";
import { findProjectKey, keyNames } from "../../lambda/core/key-names";
import { command } from "./command";
import { table } from "./format";
import { flag, required, text, UsageError } from "./options";

/** A key budget's view with the key's name beside its id (absent if the key is gone). */
function withKeyName(view: BudgetView, names: Map<string, string>): BudgetView & { key_name?: string } {
  const name = view.key === undefined ? undefined : names.get(view.key);
  return name === undefined ? view : { ...view, key_name: name };
}

/** `dmt budgets ...`: spend limits per project, key or end user. */
export const budgetCommands = [
  command({
    name: "budgets set",
    summary: "a spend limit per project, key or end user; setting it again changes it",
    options: {
      project: required("<id>", "the project"),
      key: text("<key>", "limits one key's spend (else the whole project's): its id, or its name"),
      user: text("<user id>", "limits one end user's spend; '*' gives each user the limit"),
      usd: required("<limit>", "the limit in dollars, e.g. 25 or 2.50"),
      window: required("day|month|total", "the period the limit applies to (UTC days and months)"),
      soft: flag("only reports the budget passed (events, headers), never refuses a call"),
      "include-byok": flag("counts calls on the project's own vendor keys too"),
    },
    examples: [
      "dmt budgets set --project demo --usd 50 --window month",
      "dmt budgets set --project demo --key laptop --usd 5 --window day",
      "dmt budgets set --project demo --user '*' --usd 1 --window day --soft",
    ],
    run: async ({ values, open }) => {
      if (values.key !== undefined && values.user !== undefined) {
        throw new UsageError("give --key or --user, not both: a budget has one scope");
      }
      const services = await open();
      // A key named by its name: the project's one key of that name (setBudget checks the project).
      const key =
        values.key === undefined
          ? undefined
          : await findProjectKey(services.store, await services.project(values.project), values.key);
      const input = {
        projectId: values.project,
        usd: values.usd,
        window: values.window,
        ...(key !== undefined ? { keyId: key.keyId } : {}),
        ...(values.user !== undefined ? { userId: values.user } : {}),
        soft: values.soft,
        includeByok: values["include-byok"],
      };
      const now = Date.now();
      const view = budgetView(
        await setBudget(services.store, services.budgets, input, now, services.usage),
        now,
      );
      return { ...view, ...(key !== undefined && { key_name: key.name }) };
    },
    print: (budget) =>
      `Budget ${budget.id}: ${budget.scope}${budget.key ? ` ${budget.key} ("${budget.key_name}")` : ""}${budget.user ? ` ${budget.user}` : ""}, $${budget.limit_usd} per ${budget.window}${budget.soft ? " (soft)" : ""}.`,
  }),
  command({
    name: "budgets list",
    summary: "a project's budgets with the current window's spend",
    options: { project: required("<id>", "the project") },
    examples: ["dmt budgets list --project demo"],
    run: async ({ values, open }) => {
      const services = await open();
      const projectId = await services.project(values.project);
      const [budgets, keys] = await Promise.all([
        services.budgets.list(projectId),
        services.store.listKeys(projectId),
      ]);
      const names = keyNames(keys);
      const views = await budgetViews(services.budgets, budgets, Date.now());
      return views.map((view) => withKeyName(view, names));
    },
    print: (budgets) =>
      table(
        budgets.map((b) => ({
          id: b.id,
          scope: b.scope,
          subject: b.key === undefined ? b.user : `${b.key} ("${b.key_name ?? "?"}")`,
          window: b.window,
          limit: `$${b.limit_usd}`,
          spent: b.spent_usd === undefined ? undefined : `$${b.spent_usd}`,
          kind: b.soft ? "soft" : "hard",
          byok: b.include_byok ? "counted" : undefined,
          resets: b.resets_at,
        })),
        ["id", "scope", "subject", "window", "limit", "spent", "kind", "byok", "resets"],
      ),
  }),
  command({
    name: "budgets delete",
    summary: "deletes a budget",
    args: ["<budget id>"],
    options: { project: text("<id>", "the budget's project: the budget must be one of its budgets") },
    examples: ["dmt budgets delete demo.k3x9q2ab", "dmt budgets delete --project demo demo.k3x9q2ab"],
    run: async ({ values, args: [budgetId], open }) => {
      const services = await open();
      if (
        values.project !== undefined &&
        projectOfBudget(budgetId) !== (await services.project(values.project))
      ) {
        throw errors.notFound(`Project '${values.project}' has no budget '${budgetId}'.`);
      }
      if (!(await services.budgets.delete(budgetId))) {
        throw errors.notFound(`Budget '${budgetId}' does not exist.`);
      }
      return { id: budgetId, deleted: true };
    },
    print: (deleted) => `Deleted budget ${deleted.id}.`,
  }),
];
