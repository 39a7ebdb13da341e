import { decimalUsd, formatUsd, parseUsd } from "../../lambda/core/credits";
import { formatCents } from "../../lambda/core/money";
import { type BillingProfile, checkOffered, saveRechargeRule } from "../../lambda/core/payments";
import {
  describeLine,
  monthPeriod,
  parseStatementQuery,
  readStatement,
  type Statement,
  statementCsv,
} from "../../lambda/core/statement";
import { creditsGranted } from "../../lambda/events/account-events";
import { command } from "./command";
import { iso, table } from "./format";
import { flag, required, text } from "./options";

/** The statement as text: one line per grant or day of charges, a running balance, what is in flight. */
function formatStatement(statement: Statement): string {
  const row = (date: string, description: string, amount: string, balance: string) => ({
    date,
    description,
    amount,
    balance,
  });
  const rows = [
    row(statement.from, "opening balance", "", formatCents(statement.openingMicros)),
    ...statement.lines.map((line) => {
      const what = describeLine(line, statement.grouping);
      const amount = formatCents(line.amountMicros);
      return row(
        line.day,
        what,
        line.amountMicros > 0 ? `+${amount}` : amount,
        formatCents(line.balanceMicros),
      );
    }),
    row(statement.to, "closing balance", "", formatCents(statement.closingMicros)),
  ];
  const { heldMicros, chargedMicros, openLeases } = statement.inFlight;
  const inFlight =
    openLeases > 0
      ? `\nIn flight on ${openLeases} open lease${openLeases === 1 ? "" : "s"}: ${formatCents(chargedMicros)} charged, ${formatCents(heldMicros)} reserved.`
      : "";
  return `${table(rows, ["date", "description", "amount", "balance"])}${inFlight}\nAvailable now: ${formatCents(statement.availableMicros)}. Amounts to the cent; --json has them in micro-USD.`;
}

/** The project's auto-recharge rule as `dmt credits recharge show|set|off` answer it (and --json). */
interface RechargeView {
  projectId: string;
  recharge: { threshold_usd: string; amount_usd: string } | null;
  /** Whether a Checkout purchase saved a card: without one a recharge cannot be charged. */
  saved_card: boolean;
  /** False once tried in this crossing; re-armed when the balance is seen above the threshold. */
  armed: boolean;
  last_recharge: BillingProfile["lastRecharge"] | null;
}

function rechargeView(projectId: string, profile: BillingProfile | undefined): RechargeView {
  return {
    projectId,
    recharge: profile?.recharge
      ? {
          threshold_usd: decimalUsd(profile.recharge.thresholdMicros),
          amount_usd: decimalUsd(profile.recharge.amountMicros),
        }
      : null,
    saved_card: profile?.customerId !== undefined,
    armed: profile?.recharge !== undefined && profile.armed !== false,
    last_recharge: profile?.lastRecharge ?? null,
  };
}

function printRecharge(view: RechargeView): string {
  if (!view.recharge) return `${view.projectId}: no auto-recharge rule.`;
  const rule = `${view.projectId}: below $${view.recharge.threshold_usd} charged balance, buy $${view.recharge.amount_usd} with the saved card`;
  const state = view.armed ? "armed" : "tried in this crossing (re-arms once the balance is back above)";
  const card = view.saved_card
    ? ""
    : "\nNo saved card yet: a Buy credits purchase on the Credits page saves one.";
  const last = view.last_recharge
    ? `\nLast recharge ${iso(view.last_recharge.at)}: ${view.last_recharge.outcome}${view.last_recharge.message ? ` (${view.last_recharge.message})` : ""}.`
    : "";
  return `${rule}; ${state}.${card}${last}`;
}

/** `dmt credits ...`: the prepaid balance that managed calls are charged to. */
export const creditCommands = [
  command({
    name: "credits grant",
    summary: "adds prepaid credits; the ledger records the source",
    options: {
      project: required("<id>", "the project"),
      usd: required("<amount>", "dollars to add, e.g. 10 or 2.50"),
      note: text("<text>", "a note the ledger keeps with the grant"),
      source: text("<who>", "who paid or why, e.g. an invoice number (default cli)"),
    },
    examples: ["dmt credits grant --project demo --usd 50 --source invoice-2026-001"],
    run: async ({ values, open }) => {
      const micros = parseUsd(values.usd);
      const services = await open();
      const projectId = await services.project(values.project);
      const entry = await services.credits.grant(projectId, micros, values.source ?? "cli", values.note);
      const balance = await services.credits.balance(projectId);
      const events = await services.events();
      await events.published(creditsGranted(entry, balance));
      // A balance back above a low-balance threshold re-arms its alert.
      await events.alerts.check(projectId);
      return { entry, balance };
    },
    print: ({ entry, balance }) =>
      `Granted ${formatUsd(entry.deltaMicros)} to ${balance.projectId}; available ${formatCents(balance.availableMicros)}.`,
  }),
  command({
    name: "credits balance",
    summary: "what the project can spend now, and what calls in flight hold",
    options: { project: required("<id>", "the project") },
    examples: ["dmt credits balance --project demo"],
    run: async ({ values, open }) => {
      const services = await open();
      return services.credits.balance(await services.project(values.project));
    },
    print: (balance) =>
      `${balance.projectId}: available ${formatCents(balance.availableMicros)}, held ${formatCents(balance.heldMicros)}`,
  }),
  command({
    name: "credits recharge show",
    summary: "the project's auto-recharge rule, whether a card is saved, and the last recharge",
    options: { project: required("<id>", "the project") },
    examples: ["dmt credits recharge show --project demo"],
    run: async ({ values, open }) => {
      const services = await open();
      const projectId = await services.project(values.project);
      return rechargeView(projectId, await services.payments.getProfile(projectId));
    },
    print: printRecharge,
  }),
  command({
    name: "credits recharge set",
    summary: "below a charged balance, buy an amount with the project's saved card (docs/billing.md)",
    details:
      "The check runs after each credit sweep (every minute in AWS), once per crossing: a declined card raises credits.recharge_failed and is not tried again until the balance is back above the threshold. The amount must be one Buy credits offers (DMT_STRIPE_AMOUNTS_USD locally, context dmt:stripeAmountsUsd in AWS). The card is the one the project's last Checkout purchase saved.",
    options: {
      project: required("<id>", "the project"),
      threshold: required("<usd>", "when the charged balance falls below this many dollars, e.g. 5"),
      amount: required("<usd>", "then buy this many dollars, one of the offered amounts, e.g. 25"),
    },
    examples: ["dmt credits recharge set --project demo --threshold 5 --amount 25"],
    run: async ({ values, open }) => {
      const thresholdMicros = parseUsd(values.threshold, "threshold");
      const amountMicros = parseUsd(values.amount, "amount");
      const services = await open();
      const offered = services.offeredAmountsMicros();
      checkOffered(offered, amountMicros, "amount");
      const projectId = await services.project(values.project);
      const profile = await saveRechargeRule(
        services.payments,
        projectId,
        { thresholdMicros, amountMicros },
        offered,
      );
      return rechargeView(projectId, profile);
    },
    print: printRecharge,
  }),
  command({
    name: "credits recharge off",
    summary: "removes the project's auto-recharge rule (its saved card stays for Buy credits)",
    options: { project: required("<id>", "the project") },
    examples: ["dmt credits recharge off --project demo"],
    run: async ({ values, open }) => {
      const services = await open();
      const projectId = await services.project(values.project);
      return rechargeView(projectId, await saveRechargeRule(services.payments, projectId, null, []));
    },
    print: printRecharge,
  }),
  command({
    name: "credits ledger",
    summary: "the credit statement: grants, what calls were charged (per day or lease), a running balance",
    options: {
      project: required("<id>", "the project"),
      from: text("YYYY-MM-DD", "the first day (UTC; default 29 days before --to)"),
      to: text("YYYY-MM-DD", "the last day (UTC; default today)"),
      by: text("day|lease", "one line of charges per day (default) or per lease"),
      month: text("YYYY-MM", "a calendar month's statement (instead of --from/--to)"),
      csv: flag("the statement as CSV, to send to a customer"),
    },
    examples: [
      "dmt credits ledger --project demo --from 2026-11-01 --to 2026-11-30",
      "dmt credits ledger --project demo --month 2026-11 --csv > statement-2026-11.csv",
    ],
    run: async ({ values, open }) => {
      const period =
        values.month !== undefined
          ? monthPeriod(values.month)
          : parseStatementQuery({ from: values.from, to: values.to, group: values.by }, Date.now());
      const services = await open();
      const statement = await readStatement(services.credits, await services.project(values.project), period);
      return values.csv ? { csv: statementCsv(statement), statement } : statement;
    },
    print: (result) => ("csv" in result ? result.csv.trimEnd() : formatStatement(result)),
  }),
];
