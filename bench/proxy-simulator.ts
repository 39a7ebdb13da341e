/**
 * The vendor simulator as a process of its own, for bench/proxy.bench.ts: prints `{"url": ...}` once
 * listening and stops on SIGTERM. Requests are not recorded (the bench sends many).
 */
import { startSimulator } from "../lambda/local/simulator";

const simulator = await startSimulator({ record: false });
process.stdout.write(`${JSON.stringify({ url: simulator.url })}\n`);
process.on("SIGTERM", () => {
  void simulator.close().then(() => process.exit(0));
});
