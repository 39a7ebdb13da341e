#!/usr/bin/env node
// The `dmt` command: runs the TypeScript CLI through tsx, so a fresh clone needs no build step.
import { register } from "tsx/esm/api";

// The AWS SDK warns on Node 20, which the local stack supports; Lambda runs Node 22+.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true";
register();
await import("./cli.ts");
