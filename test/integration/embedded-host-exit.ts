// Run in a child process by test/integration/warehouse-thread.test.ts, on the data dir DMT_DATA_DIR:
// `host` starts the embedded host from the environment and closes it, `warehouse` sends a record through
// the threaded warehouse and closes it. Either prints how it ended, then the process must exit on its
// own: a worker thread or a server left open would keep it alive.
import { syntheticRecord } from "../../bench/warehouse-records";
import { silentLogger } from "../../lambda/core/logger";
import { parseLocalConfig } from "../../lambda/local/config";
import { startEmbeddedHost } from "../../lambda/local/host";
import { openLocalStore } from "../../lambda/local/store";
import { startThreadedWarehouse } from "../../lambda/local/warehouse-thread";

const config = parseLocalConfig();
try {
  if (process.argv[2] === "warehouse") {
    const local = await openLocalStore(config.dataDir);
    const warehouse = await startThreadedWarehouse({
      dataDir: config.dataDir,
      logger: silentLogger,
      flushIntervalMs: 60_000,
      store: local,
      purgers: [],
    });
    await warehouse.queue.send(syntheticRecord(0));
    await warehouse.close();
    await local.close();
  } else {
    const host = await startEmbeddedHost(config, silentLogger);
    await host.close();
  }
  process.stdout.write("closed\n");
} catch (err) {
  process.stdout.write(`failed: ${(err as Error).message}\n`);
}
