// The warehouse worker's entry (lambda/local/warehouse-thread.ts starts it and holds its code). Plain
// JavaScript that registers tsx, so the worker runs the TypeScript consumer (the code Lambda runs)
// without a build step, under `dmt serve` and the tests alike.
import { register } from "tsx/esm/api";

register();
const { runWarehouseWorker } = await import("./warehouse-thread.ts");
await runWarehouseWorker();
