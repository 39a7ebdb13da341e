import { type AlertRule, RULE_IDS } from "../../lambda/core/alert-rules";
import { errors } from "../../lambda/core/errors";
import { formatUsd } from "../../lambda/core/money";
import { setAlertRules } from "../../lambda/events/alerts";
import { command } from "./command";
import { iso, table } from "./format";
import { required, text, UsageError } from "./options";

/** What `alerts set` says it stored. */
function describeRule(rule: AlertRule): string {
  if (rule.kind === "low_balance") {
    return `Alert set: balance.low when ${rule.projectId}'s available credits fall below ${formatUsd(rule.thresholdMicros)}.`;
  }
  const below = rule.thresholds.filter((p) => p < 100).map((p) => `${p}%`);
  const parts = [
    ...(below.length > 0 ? [`budget.threshold at ${below.join(", ")}`] : []),
    ...(rule.thresholds.includes(100) ? ["budget.exceeded at 100%"] : []),
  ];
  return `Alert set: ${parts.join("; ")} of each of ${rule.projectId}'s budgets, once per window.`;
}

const project = required("<id>", "the project");

/** `dmt alerts ...`: the rules that send `balance.low` and budget events. */
export const alertCommands = [
  command({
    name: "alerts set",
    summary: "an alert when the balance falls below an amount, or a budget passes a share of its limit",
    options: {
      project,
      "low-balance-usd": text("<amount>", "sends balance.low once each time available credits fall below it"),
      "budget-thresholds": text(
        "<percent,...>",
        "sends budget.threshold at each share of every budget's limit (budget.exceeded at 100)",
      ),
    },
    examples: [
      "dmt alerts set --project demo --low-balance-usd 5",
      "dmt alerts set --project demo --budget-thresholds 50,80,100",
    ],
    run: async ({ values, open }) => {
      const amount = values["low-balance-usd"];
      const thresholds = values["budget-thresholds"];
      if (amount === undefined && thresholds === undefined) {
        throw new UsageError("give --low-balance-usd <amount>, --budget-thresholds <percent,...> or both");
      }
      const services = await open();
      const projectId = await services.project(values.project);
      const events = await services.events();
      return setAlertRules(
        { rules: events.rules, cached: events.cachedRules, alerts: events.alerts },
        projectId,
        {
          ...(amount !== undefined && { lowBalanceUsd: amount }),
          ...(thresholds !== undefined && { budgetThresholds: thresholds }),
        },
        Date.now(),
      );
    },
    print: (rules) => rules.map(describeRule).join("\n"),
  }),
  command({
    name: "alerts list",
    summary: "a project's alert rules, and whether the balance alert has fired",
    options: { project },
    examples: ["dmt alerts list --project demo"],
    run: async ({ values, open }) => {
      const services = await open();
      const projectId = await services.project(values.project);
      return (await services.events()).rules.list(projectId);
    },
    print: (rules) =>
      table(
        rules.map((r) =>
          r.kind === "low_balance"
            ? {
                rule: r.ruleId,
                kind: r.kind,
                threshold: formatUsd(r.thresholdMicros),
                state: r.armed ? "armed" : "fired",
                fired: iso(r.firedAt),
              }
            : {
                rule: r.ruleId,
                kind: r.kind,
                threshold: r.thresholds.map((p) => `${p}%`).join(","),
                state: "per budget window",
              },
        ),
        ["rule", "kind", "threshold", "state", "fired"],
      ),
  }),
  command({
    name: "alerts delete",
    summary: "deletes an alert rule",
    args: [`<rule id: ${RULE_IDS.join(" | ")}>`],
    options: { project },
    examples: ["dmt alerts delete --project demo low-balance"],
    run: async ({ values, args: [ruleId], open }) => {
      const services = await open();
      const projectId = await services.project(values.project);
      if (!(await (await services.events()).rules.delete(projectId, ruleId))) {
        throw errors.notFound(`Project '${projectId}' has no alert rule '${ruleId}'.`);
      }
      return { projectId, ruleId, deleted: true };
    },
    print: (deleted) => `Deleted alert rule ${deleted.ruleId}.`,
  }),
];
