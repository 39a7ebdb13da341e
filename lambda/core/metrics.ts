/** The units our metrics use (CloudWatch's names). */
export type MetricUnit = "Count" | "Milliseconds";

/** Counters and timings of one function: CloudWatch metrics in Lambda, nothing locally. */
export interface Metrics {
  add(name: string, unit: MetricUnit, value: number): void;
}

/** Metrics that go nowhere: the local host has no metrics backend. */
export const noMetrics: Metrics = { add() {} };
