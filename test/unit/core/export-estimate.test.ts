import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import {
  DASHBOARD_DOWNLOAD_MAX_ROWS,
  MEASURED_LAMBDA_ROWS_PER_SECOND,
  STREAMED_EXPORT_MAX_ROWS,
} from "../../../lambda/core/export-estimate";

describe("export size limits", () => {
  const measured = JSON.parse(readFileSync("bench/results/lambda-export-csv.json", "utf8")) as {
    lambda: { rowsPerSecond: number; rows: number };
  };
  const halfRate = MEASURED_LAMBDA_ROWS_PER_SECOND / 2;

  it("take the rate from the benchmark of a million rows through the Lambda handler", () => {
    expect(measured.lambda.rows).toBe(1_000_000);
    expect(MEASURED_LAMBDA_ROWS_PER_SECOND).toBe(Math.floor(measured.lambda.rowsPerSecond));
  });

  it("let a streamed export page for 10 of its 15 minutes at half that rate", () => {
    expect(STREAMED_EXPORT_MAX_ROWS).toBeLessThanOrEqual(halfRate * 600);
    expect(STREAMED_EXPORT_MAX_ROWS).toBeGreaterThan(halfRate * 600 * 0.8);
  });

  it("let a dashboard download page for 20 of the dashboard API's 29 seconds at half that rate, less the upload's share", () => {
    expect(DASHBOARD_DOWNLOAD_MAX_ROWS).toBeLessThanOrEqual(halfRate * 20);
  });
});
