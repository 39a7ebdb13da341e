/**
 * A DynamoDB-compatible store (dynalite) as a process of its own, for bench/metering.bench.ts: as in
 * AWS, where the store's work is not done on the server's CPU. `npx tsx bench/metering-store.ts <dir>`
 * prints `{"url": ...}` once listening and stops on SIGTERM.
 */
import { startEmbeddedDynamo } from "../lambda/local/embedded-dynamo";

const store = await startEmbeddedDynamo(process.argv[2] ?? "");
process.stdout.write(`${JSON.stringify({ url: store.endpoint })}\n`);
process.on("SIGTERM", () => {
  void store.close().then(() => process.exit(0));
});
