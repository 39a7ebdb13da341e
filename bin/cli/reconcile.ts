import type { Drift } from "../../lambda/core/reconcile";
import { DEFAULT_DATA_DIR, parseLocalConfig, vendorSettings } from "../../lambda/local/config";
import { command } from "./command";
import { table } from "./format";
import { required, UsageError } from "./options";

const signed = (n: number) => (n > 0 ? `+${n}` : String(n));

const drifted = (d: Drift) =>
  d.difference.input !== 0 || d.difference.output !== 0 || d.difference.cached !== 0;

/** `dmt reconcile`: our managed calls' tokens against the vendor's own usage report. */
export const reconcileCommands = [
  command({
    name: "reconcile",
    summary: "managed tokens per model and day against the vendor's usage report (an admin key)",
    details: `The vendor's organization admin key is read from the environment, never the command line:
OPENAI_ADMIN_KEY (sk-admin-...) or ANTHROPIC_ADMIN_KEY (sk-ant-admin...). Reads the local data dir
(${DEFAULT_DATA_DIR} or DMT_DATA_DIR).`,
    options: {
      vendor: required("<openai|anthropic>", "the vendor whose usage report is read"),
      from: required("<YYYY-MM-DD>", "the first day (UTC)"),
      to: required("<YYYY-MM-DD>", "the last day (UTC), at most 366 days after --from"),
    },
    examples: [
      "OPENAI_ADMIN_KEY=sk-admin-... dmt reconcile --vendor openai --from 2026-11-01 --to 2026-11-30",
    ],
    run: async ({ values, open, stackName }) => {
      const { ADMIN_KEYS, parseDayRange, parseVendor, ReconcileInputError } = await import(
        "../../lambda/core/reconcile"
      );
      let vendor: ReturnType<typeof parseVendor>;
      let range: ReturnType<typeof parseDayRange>;
      try {
        vendor = parseVendor(values.vendor);
        range = parseDayRange(values.from, values.to);
      } catch (err) {
        if (err instanceof ReconcileInputError) throw new UsageError(err.message);
        throw err;
      }
      if (stackName !== undefined)
        throw new UsageError("reconcile reads the local data dir; --stack is not supported");
      // The admin key is read here and only handed to the request's header: never printed or logged.
      const { env, prefix } = ADMIN_KEYS[vendor];
      const adminKey = process.env[env];
      if (!adminKey) {
        throw new UsageError(
          `${env} is not set: the ${vendor} usage report needs an organization admin key (${prefix}...)`,
        );
      }
      if (!adminKey.startsWith(prefix))
        throw new UsageError(`${env} is not an admin key (those start ${prefix})`);
      const config = parseLocalConfig();
      // The upstream the proxy calls for this vendor: DMT_UPSTREAM_<VENDOR>, else the vendor's own.
      const { VENDOR_DEFINITIONS } = await import("../../lambda/vendors");
      const upstream = vendorSettings(config, vendor).upstream ?? VENDOR_DEFINITIONS[vendor].defaultUpstream;
      const services = await open();
      const { openLocalWarehouseQuery } = await import("../../lambda/local/warehouse");
      const { composeReconcile } = await import("../reconcile");
      const query = await openLocalWarehouseQuery(config.dataDir);
      try {
        const run = composeReconcile({
          query,
          projects: () => services.store.listProjects(),
          upstream,
          adminKey,
        });
        const rows = await run(vendor, range);
        return { vendor, from: range.from, to: range.to, drifted: rows.filter(drifted).length, rows };
      } finally {
        query.close();
      }
    },
    print: ({ vendor, from, to, drifted, rows }) => {
      const cells = rows.map((d) => ({
        day: d.day,
        model: d.model,
        input: `${d.ours.input}/${d.theirs.input}`,
        "input diff": signed(d.difference.input),
        output: `${d.ours.output}/${d.theirs.output}`,
        "output diff": signed(d.difference.output),
        cached: `${d.ours.cached}/${d.theirs.cached}`,
        "cached diff": signed(d.difference.cached),
      }));
      const summary =
        drifted === 0
          ? `No drift: ${rows.length} model-days agree with ${vendor}'s usage report, ${from} to ${to}.`
          : `Drift on ${drifted} of ${rows.length} model-days against ${vendor}'s usage report, ${from} to ${to} (tokens ours/theirs; diff = theirs - ours).`;
      return `${table(cells, ["day", "model", "input", "input diff", "output", "output diff", "cached", "cached diff"])}\n${summary}`;
    },
  }),
];
