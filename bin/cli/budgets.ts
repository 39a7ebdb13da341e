import { type BudgetView, budgetView, budgetViews, setBudget } from "../../lambda/core/budgets";
import { errors } from "../../lambda/core/errors";
import { command } from "./command";
import { table } from "./format";
import { flag, required, text, UsageError } from "./options";

/** `dmt budgets ...`: spend limits per project, key or end user. */
export const budgetCommands = [
  command({
    name: "budgets set",
    summary: "a spend limit per project, key or end user; setting it again changes it",
    options: {
      project: required("<id>", "the project"),
      key: text("<key id>", "limits one key's spend (else the whole project's)"),
      user: text("<user id>", "limits one end user's spend; '*' gives each user the limit"),
      usd: required("<limit>", "the limit in dollars, e.g. 25 or 2.50"),
      window: required("day|month|total", "the period the limit applies to (UTC days and months)"),
      soft: flag("only reports the budget passed (events, headers), never refuses a call"),
      "include-byok": flag("counts calls on the project's own vendor keys too"),
    },
    examples: [
      "dmt budgets set --project demo --usd 50 --window month",
      "dmt budgets set --project demo --user '*' --usd 1 --window day --soft",
    ],
    run: async ({ values, open }) => {
      if (values.key !== undefined && values.user !== undefined) {
        throw new UsageError("give --key or --user, not both: a budget has one scope");
      }
      const input = {
        projectId: values.project,
        usd: values.usd,
        window: values.window,
        ...(values.key !== undefined ? { keyId: values.key } : {}),
        ...(values.user !== undefined ? { userId: values.user } : {}),
        soft: values.soft,
        includeByok: values["include-byok"],
      };
      const services = await open();
      const now = Date.now();
      return budgetView(await setBudget(services.store, services.budgets, input, now, services.usage), now);
    },
    print: (budget) =>
      `Budget ${budget.id}: ${budget.scope}${budget.key ? ` ${budget.key}` : ""}${budget.user ? ` ${budget.user}` : ""}, $${budget.limit_usd} per ${budget.window}${budget.soft ? " (soft)" : ""}.`,
  }),
  command({
    name: "budgets list",
    summary: "a project's budgets with the current window's spend",
    options: { project: required("<id>", "the project") },
    examples: ["dmt budgets list --project demo"],
    run: async ({ values, open }) => {
      const services = await open();
      const projectId = await services.project(values.project);
      return budgetViews(services.budgets, await services.budgets.list(projectId), Date.now());
    },
    print: (budgets) =>
      table(
        budgets.map((b: BudgetView) => ({
          id: b.id,
          scope: b.scope,
          subject: b.key ?? b.user,
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
    options: {},
    examples: ["dmt budgets delete demo.k3x9q2ab"],
    run: async ({ args: [budgetId], open }) => {
      if (!(await (await open()).budgets.delete(budgetId))) {
        throw errors.notFound(`Budget '${budgetId}' does not exist.`);
      }
      return { id: budgetId, deleted: true };
    },
    print: (deleted) => `Deleted budget ${deleted.id}.`,
  }),
];
