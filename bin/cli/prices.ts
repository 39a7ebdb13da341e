import { readFileSync, writeFileSync } from "node:fs";
import { VENDOR_NAMES } from "../../lambda/core/vendor-names";
import { command } from "./command";
import { flag, oneOf, text, UsageError } from "./options";

/** `dmt prices ...`: the price catalogue calls are charged with. */
export const priceCommands = [
  command({
    name: "prices list",
    summary: "the active price catalogue (with a deployment's override and markup)",
    options: { vendor: oneOf(VENDOR_NAMES, "only this vendor's models") },
    examples: ["dmt prices list --vendor openai"],
    run: async ({ values, stackName }) => {
      // A stack's catalogue is the one it was deployed with: its override and markup included.
      const catalogue =
        stackName === undefined
          ? (await import("../../lambda/adapters/fs/price-catalogue")).activePriceCatalogue()
          : await (await import("../aws-target")).stackPriceCatalogue(stackName);
      const rows = catalogue.list(values.vendor ? { vendor: values.vendor } : {});
      const markup = Number(catalogue.markup.num) / Number(catalogue.markup.den);
      return { priceVersion: catalogue.priceVersion, markup, rows };
    },
    print: async (prices) => {
      const { formatPriceTable } = await import("../../lambda/core/pricing");
      return `Prices ${prices.priceVersion} (markup ${prices.markup}); USD per million tokens unless noted.\n${formatPriceTable(prices.rows)}`;
    },
  }),
  command({
    name: "prices import",
    summary: "compares LiteLLM's price list with the catalogue; --apply writes it as the override",
    args: ["<litellm prices.json>"],
    options: {
      apply: flag("writes the catalogue with LiteLLM's changes as the deployment's override"),
      out: text("<override.json>", "the override file --apply writes (default: DMT_PRICES_OVERRIDE's file)"),
    },
    examples: [
      "dmt prices import model_prices_and_context_window.json",
      "dmt prices import model_prices_and_context_window.json --apply --out prices/override.json",
    ],
    run: async ({ values, args: [file] }) => {
      let litellm: unknown;
      try {
        litellm = JSON.parse(readFileSync(file, "utf8"));
      } catch (err) {
        throw new UsageError(`${file}: ${String(err instanceof Error ? err.message : err).split("\n")[0]}`);
      }
      const { planPriceImport } = await import("../../lambda/adapters/fs/price-catalogue");
      const plan = planPriceImport(litellm, new Date().toISOString().slice(0, 10));
      if (!values.apply) return { ...plan, written: null };
      // The deployment's override: --out, else the file DMT_PRICES_OVERRIDE names.
      const named = process.env.DMT_PRICES_OVERRIDE;
      const out = values.out ?? (named && !named.trimStart().startsWith("{") ? named : undefined);
      if (out === undefined)
        throw new UsageError("--apply needs --out <file> (or DMT_PRICES_OVERRIDE naming a file)");
      writeFileSync(out, `${JSON.stringify(plan.override, null, 2)}\n`);
      return { ...plan, written: out };
    },
    print: ({ comparison, leftOut, written }) =>
      [
        `New models (${comparison.newModels.length}):`,
        ...comparison.newModels.map((m) => `  + ${m.vendor}/${m.model} (${m.kind})`),
        `Changed prices (${comparison.changed.length}):`,
        ...comparison.changed.map((d) => `  ~ ${d.vendor}/${d.model} ${d.field}: ${d.ours} -> ${d.theirs}`),
        `Dimensions we lack (${comparison.missing.length}):`,
        ...comparison.missing.map(
          (d) => `  ? ${d.vendor}/${d.model} ${d.field}${d.theirs ? `: ${d.theirs}` : ""}`,
        ),
        ...leftOut.map((m) => `Left out ${m.vendor}/${m.model}: ${m.why}`),
        `Entries of other providers or kinds skipped: ${comparison.skipped}`,
        written
          ? `Override written to ${written}.`
          : "Nothing written: add --apply --out <file> to write the override.",
      ].join("\n"),
  }),
];
