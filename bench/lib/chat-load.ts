/**
 * Closed-loop load of chat completions on one target (autocannon), shared by the metering and overhead
 * benches: the same request, and latencies taken from every response at hrtime resolution
 * (autocannon's own histogram keeps whole milliseconds).
 */
import { randomUUID } from "node:crypto";
import autocannon from "autocannon";
import { percentile } from "./stats";

// The options these calls use that autocannon's types leave out.
declare module "autocannon" {
  interface Options {
    method?: string;
    body?: string;
    requests?: { setupRequest?(request: { headers: Record<string, string> }): unknown }[];
  }
}

/** The chat request every target is sent. */
export const CHAT = JSON.stringify({
  model: "gpt-4o-mini",
  messages: [{ role: "user", content: "Write one short sentence about benchmarks." }],
  max_tokens: 32,
});

export interface ChatTarget {
  name: string;
  url: string;
  headers: Record<string, string>;
  /** A fresh X-Request-ID on every request. */
  requestIds: boolean;
}

export interface LoadFigures {
  target: string;
  connections: number;
  round: number;
  requests: number;
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  failures: number;
}

export function chatLoad(
  target: ChatTarget,
  connections: number,
  seconds: number,
  round: number,
): Promise<LoadFigures> {
  const latencies: number[] = [];
  return new Promise((resolve, reject) => {
    const instance = autocannon(
      {
        url: target.url,
        connections,
        duration: seconds,
        method: "POST",
        body: CHAT,
        headers: { "content-type": "application/json", ...target.headers },
        ...(target.requestIds
          ? {
              requests: [
                {
                  setupRequest: (request) => ({
                    ...request,
                    headers: { ...request.headers, "x-request-id": randomUUID() },
                  }),
                },
              ],
            }
          : {}),
      },
      (err, result) => {
        if (err) return reject(err);
        const sorted = Float64Array.from(latencies).sort();
        resolve({
          target: target.name,
          connections,
          round,
          requests: result["2xx"],
          requestsPerSecond: result["2xx"] / result.duration,
          p50Ms: percentile(sorted, 0.5),
          p99Ms: percentile(sorted, 0.99),
          failures: result.errors + result.timeouts + result.non2xx,
        });
      },
    );
    instance.on("response", (_client: unknown, status: number, _bytes: number, ms: number) => {
      if (status >= 200 && status < 300) latencies.push(ms);
    });
  });
}
