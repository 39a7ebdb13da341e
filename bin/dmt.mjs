#!/usr/bin/env node
// The `dmt` command. Commands run from the bundle that `npm install` builds (bin/build-cli.mjs), which
// starts in a fraction of a second; while it is missing or older than a source it was built from, they
// run from the sources through tsx.
import { readFileSync, statSync } from "node:fs";

// The AWS SDK warns on Node 20, which the local stack supports; Lambda runs Node 22+.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true";

const root = new URL("../", import.meta.url);

/** Whether the bundle exists and no source it was built from changed since. */
function bundleIsFresh() {
  try {
    const { builtAt, inputs } = JSON.parse(readFileSync(new URL("dist/cli/inputs.json", root), "utf8"));
    return inputs.every((path) => statSync(new URL(path, root)).mtimeMs <= builtAt);
  } catch {
    return false;
  }
}

if (process.env.DMT_CLI_FROM_SOURCE !== "1" && bundleIsFresh()) {
  await import(new URL("dist/cli/dmt.js", root).href);
} else {
  const { register } = await import("tsx/esm/api");
  register();
  await import("./cli-entry.ts");
}
