/**
 * The cost of the stack is told once: README.md and docs/aws.md hold the same tables (per call, fixed
 * per month, a worked month), and every priced line says where its price was read and when.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { REPO_ROOT } from "../../lib/lambda-defaults";

const MARKER = "<!-- cost table: the same in README.md and docs/aws.md (test/infra/cost-table.test.ts) -->";

/** The lines from the marker to the end of the worked month's table. */
function costBlock(file: string): string[] {
  const lines = readFileSync(join(REPO_ROOT, file), "utf8").split("\n");
  const start = lines.indexOf(MARKER);
  expect(start, `${file} has the cost table's marker`).toBeGreaterThanOrEqual(0);
  const end = lines.findIndex((line, i) => i > start && line.startsWith("| 100 million calls"));
  expect(end, `${file}'s cost table ends with the worked month`).toBeGreaterThan(start);
  return lines.slice(start, end + 1);
}

describe("the cost table", () => {
  it("is the same in README.md and docs/aws.md", () => {
    expect(costBlock("README.md")).toEqual(costBlock("docs/aws.md"));
  });

  it("names the source and the date of every priced line", () => {
    const rows = costBlock("docs/aws.md").filter(
      (line) => line.startsWith("| ") && !line.startsWith("| -") && !line.startsWith("| **"),
    );
    const priced = rows.filter((line) => /aws\.amazon\.com|at the same/.test(line));
    // Per call: 12 lines; fixed: 7 (AWS WAF's request-size rule in each).
    expect(priced.length).toBe(19);
    for (const line of priced) expect(line, line).toMatch(/20\d\d-\d\d-\d\d/);
  });

  it("counts data transfer out, nine secrets, the KMS key, the alarms, the dashboard and Cognito", () => {
    const text = costBlock("docs/aws.md").join("\n");
    for (const item of [
      "data transfer out",
      "nine secrets",
      "KMS key",
      "CloudWatch alarms",
      "CloudWatch dashboard",
      "Cognito",
      "1 million calls",
      "100 million calls",
    ]) {
      expect(text).toContain(item);
    }
  });
});
