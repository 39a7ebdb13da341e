import autocannon from "autocannon";
import { percentile } from "./stats";

export interface LoadResult {
  connections: number;
  seconds: number;
  requests: number;
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  meanMs: number;
  errors: number;
  non2xx: number;
}

/**
 * Runs autocannon against one URL. Latencies are taken from every response at hrtime resolution:
 * autocannon's own histogram keeps whole milliseconds, too coarse on loopback.
 */
export function runLoad(
  url: string,
  connections: number,
  seconds: number,
  headers: Record<string, string>,
): Promise<LoadResult> {
  const latencies: number[] = [];
  return new Promise((resolve, reject) => {
    const instance = autocannon({ url, connections, duration: seconds, headers }, (err, result) => {
      if (err) return reject(err);
      const sorted = Float64Array.from(latencies).sort();
      resolve({
        connections,
        seconds: result.duration,
        requests: result["2xx"],
        requestsPerSecond: result["2xx"] / result.duration,
        p50Ms: percentile(sorted, 0.5),
        p99Ms: percentile(sorted, 0.99),
        meanMs: sorted.reduce((sum, v) => sum + v, 0) / Math.max(sorted.length, 1),
        errors: result.errors + result.timeouts,
        non2xx: result.non2xx,
      });
    });
    instance.on("response", (_client: unknown, status: number, _bytes: number, ms: number) => {
      if (status >= 200 && status < 300) latencies.push(ms);
    });
  });
}
