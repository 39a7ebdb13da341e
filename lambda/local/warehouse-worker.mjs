// The warehouse worker's entry. Plain JavaScript that registers tsx, so the worker runs the TypeScript
// consumer (the code Lambda runs) without a build step, under `dmt serve` and the tests alike.
import { register } from "tsx/esm/api";

register();
await import("./warehouse-worker.ts");
