/** The units our metrics use (CloudWatch's names). */
export type MetricUnit = "Count" | "Milliseconds";

/** Counters and timings of one function: CloudWatch metrics in Lambda, nothing locally. */
export interface Metrics {
  /** `dimensions` beside the function's own: the proxies' `vendor` (one function may serve several). */
  add(name: string, unit: MetricUnit, value: number, dimensions?: Record<string, string>): void;
}

/** Metrics that go nowhere: the local host has no metrics backend. */
export const noMetrics: Metrics = { add() {} };
