// The part of autocannon's API the benchmarks use (the package ships no types).
declare module "autocannon" {
  import type { EventEmitter } from "node:events";

  interface Options {
    url: string;
    connections?: number;
    /** Seconds. */
    duration?: number;
    headers?: Record<string, string>;
  }

  interface Result {
    errors: number;
    timeouts: number;
    non2xx: number;
    "2xx": number;
    /** Seconds. */
    duration: number;
  }

  /** Emits `response` (client, statusCode, resBytes, responseTimeMs) for every response. */
  type Instance = EventEmitter;

  export default function autocannon(
    options: Options,
    done: (err: Error | null, result: Result) => void,
  ): Instance;
}
