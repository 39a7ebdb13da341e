import { errors } from "../../lambda/core/errors";
import {
  createPlan,
  DEFAULT_PLAN_ID,
  defaultPlan,
  deletePlan,
  type Plan,
  type PlanVersion,
  pairs,
  planView,
  updatePlan,
} from "../../lambda/core/plans";
import type { PriceCatalogue } from "../../lambda/core/pricing";
import { command } from "./command";
import { iso, table } from "./format";
import { date, repeated, required, text } from "./options";

/** The catalogue the deployment charges with: its models (for the glob warnings) and its markup. */
async function catalogueOf(stackName: string | undefined): Promise<PriceCatalogue> {
  return stackName === undefined
    ? (await import("../../lambda/adapters/fs/price-catalogue")).activePriceCatalogue()
    : (await import("../aws-target")).stackPriceCatalogue(stackName);
}

const catalogueModels = (catalogue: PriceCatalogue) =>
  catalogue.list().flatMap((row) => [row.model, ...row.aliases]);

/** "+10% · openai +5% · gpt-4o* -3%": a version's rules on one line. */
function rulesText(version: PlanVersion | undefined): string {
  if (!version) return "-";
  const signed = (percent: string) => (percent.startsWith("-") ? `${percent}%` : `+${percent}%`);
  return [
    signed(version.percent),
    ...Object.entries(version.vendors).map(([vendor, p]) => `${vendor} ${signed(p ?? "0")}`),
    ...Object.entries(version.models).map(([glob, p]) => `${glob} ${signed(p)}`),
  ].join(" · ");
}

function printPlan(result: { plan: Plan; warnings: string[] }, verb: string): string {
  const view = planView(result.plan, Date.now());
  const latest = result.plan.versions[result.plan.versions.length - 1];
  const when = latest && latest.effectiveFrom > Date.now() ? ` from ${iso(latest.effectiveFrom)}` : "";
  return [
    `${verb} plan ${result.plan.planId} version ${latest?.version}${when}: ${rulesText(latest)}.`,
    ...(view.current && view.current !== latest
      ? [`Until then: version ${view.current.version}, ${rulesText(view.current)}.`]
      : []),
    ...result.warnings.map((w) => `warning: ${w}`),
  ].join("\n");
}

const ruleOptions = {
  name: text("<text>", "a name people read (default: the id)"),
  vendor: repeated("<vendor>=<percent>", "a vendor's own percentage, e.g. openai=5 (repeatable)"),
  model: repeated(
    "<glob>=<percent>",
    "a model glob's percentage, e.g. 'gpt-4o*=-10' (repeatable; the most specific wins)",
  ),
  at: date(
    "<time>",
    "when it takes effect (default now; never in the past: recorded calls keep their price)",
  ),
};

/** `dmt plans ...`: what each project pays over the vendors' list prices. */
export const planCommands = [
  command({
    name: "plans create",
    summary: "a price plan: a percentage over list price, with optional ones per vendor or model",
    details:
      "A negative percentage is a discount (down to -100, free), written with '=' (--percent=-5, --model=gpt-4o*=-5) so it is not read as an option. The most specific rule wins: a model glob, then the vendor, then --percent. Projects are put on a plan with `dmt projects update <id> --plan <plan id>`; a project on none pays the default plan (DMT_PRICE_MARKUP).",
    args: ["<plan id>"],
    options: {
      percent: required("<percent>", "over list price for every call, e.g. 20 or -5"),
      ...ruleOptions,
    },
    examples: [
      "dmt plans create resellers --percent 20",
      "dmt plans create staff --percent=-50",
      "dmt plans create partners --percent 10 --vendor anthropic=8 --model 'gpt-4o*=5' --name 'Partner pricing'",
    ],
    run: async ({ values, args: [planId], open, stackName }) => {
      const [services, catalogue] = await Promise.all([open(), catalogueOf(stackName)]);
      return createPlan(services.plans, planId, inputOf(values), catalogueModels(catalogue), Date.now());
    },
    print: (result) => printPlan(result, "Created"),
  }),
  command({
    name: "plans update",
    summary: "a new version of a plan, from now or a stated time (recorded calls keep their price)",
    details:
      "Rules not given are kept from the newest version; --vendor or --model given replace that whole set. A version scheduled after --at is replaced.",
    args: ["<plan id>"],
    options: { percent: text("<percent>", "over list price for every call"), ...ruleOptions },
    examples: [
      "dmt plans update resellers --percent 25",
      "dmt plans update resellers --model 'claude-*=15' --at 2027-01-01",
    ],
    run: async ({ values, args: [planId], open, stackName }) => {
      const [services, catalogue] = await Promise.all([open(), catalogueOf(stackName)]);
      return updatePlan(services.plans, planId, inputOf(values), catalogueModels(catalogue), Date.now());
    },
    print: (result) => printPlan(result, "Updated"),
  }),
  command({
    name: "plans list",
    summary: "every price plan, with the version in force now",
    options: {},
    examples: ["dmt plans list"],
    run: async ({ open, stackName }) => {
      const [services, catalogue] = await Promise.all([open(), catalogueOf(stackName)]);
      const now = Date.now();
      return [defaultPlan(catalogue.markup), ...(await services.plans.listPlans())].map((p) =>
        planView(p, now),
      );
    },
    print: (plans) =>
      table(
        plans.map((p) => ({
          plan: p.planId,
          name: p.name,
          version: String(p.current?.version ?? "-"),
          rules: rulesText(p.current),
          scheduled: p.versions.some((v) => v.effectiveFrom > Date.now()) ? "yes" : "",
        })),
        ["plan", "name", "version", "rules", "scheduled"],
      ),
  }),
  command({
    name: "plans show",
    summary: "one plan's versions, oldest first",
    args: ["<plan id>"],
    options: {},
    examples: ["dmt plans show resellers", "dmt plans show default --json"],
    run: async ({ args: [planId], open, stackName }) => {
      const plan =
        planId === DEFAULT_PLAN_ID
          ? defaultPlan((await catalogueOf(stackName)).markup)
          : await (await open()).plans.getPlan(planId);
      if (!plan) throw errors.notFound(`Plan '${planId}' does not exist.`);
      return planView(plan, Date.now());
    },
    print: (plan) =>
      `Plan ${plan.planId} (${plan.name})\n${table(
        plan.versions.map((v) => ({
          version: String(v.version),
          from: v.effectiveFrom === 0 ? "always" : iso(v.effectiveFrom),
          rules: rulesText(v),
          now: v === plan.current ? "in force" : v.effectiveFrom > Date.now() ? "scheduled" : "",
        })),
        ["version", "from", "rules", "now"],
      )}`,
  }),
  command({
    name: "plans delete",
    summary: "a plan no project is on (refused while one is, or will be)",
    args: ["<plan id>"],
    options: {},
    examples: ["dmt plans delete trial"],
    run: async ({ args: [planId], open }) => {
      await deletePlan((await open()).plans, planId, Date.now());
      return { planId, deleted: true };
    },
    print: ({ planId }) => `Deleted plan ${planId}.`,
  }),
];

function inputOf(values: {
  percent?: string | undefined;
  name?: string | undefined;
  vendor?: string[] | undefined;
  model?: string[] | undefined;
  at?: number | undefined;
}) {
  const vendors = pairs("vendor", values.vendor);
  const models = pairs("model", values.model);
  return {
    ...(values.percent !== undefined && { percent: values.percent }),
    ...(values.name !== undefined && { name: values.name }),
    ...(vendors && { vendors }),
    ...(models && { models }),
    ...(values.at !== undefined && { at: values.at }),
  };
}
