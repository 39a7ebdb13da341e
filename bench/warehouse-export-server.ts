/**
 * The export endpoint alone over a warehouse folder, for bench/warehouse.bench.ts to measure in a process
 * of its own (so its peak RSS is the export's). Prints `listening <port>` when ready.
 * Usage: tsx bench/warehouse-export-server.ts <warehouse folder>
 */
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { DuckDBWarehouseQuery } from "../lambda/adapters/duckdb/export-query";
import { FsObjectStore } from "../lambda/adapters/fs/object-store";
import { exportRoutes } from "../lambda/app/data-api/exports";
import { mountRoutes } from "../lambda/app/routing";
import { appShell } from "../lambda/app/shell";
import { silentLogger } from "../lambda/core/logger";
import { TIER_LIMITS } from "../lambda/core/model";

const root = process.argv[2];
if (!root) throw new Error("usage: warehouse-export-server.ts <warehouse folder>");

const query = await DuckDBWarehouseQuery.open(root);
const app = appShell(silentLogger);
app.use("/api/*", async (c, next) => {
  c.set("auth", {
    projectId: "bench",
    keyId: "benchkey00000000",
    tier: "free",
    rateLimit: TIER_LIMITS.free,
    store: "full",
  });
  await next();
});
mountRoutes(
  app,
  exportRoutes({
    query,
    settings: { getExportDestination: async () => undefined },
    openDestination: (d) => new FsObjectStore(d.kind === "file" ? d.path : root),
    logger: silentLogger,
  }),
);
const server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" });
server.once("listening", () => {
  process.stdout.write(`listening ${(server.address() as AddressInfo).port}\n`);
});
