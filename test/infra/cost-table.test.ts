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

  it("adds up: the per-million totals, the fixed month and the worked month follow from the lines", () => {
    const rows = costBlock("docs/aws.md")
      .filter((line) => line.startsWith("| ") && !line.startsWith("| -"))
      .map((line) => line.split("|").map((cell) => cell.trim()));
    // "$4.50–13.50" -> [4.5, 13.5]; "$3.50" -> [3.5, 3.5]; "~$3,110–4,010" -> [3110, 4010]
    const dollars = (cell: string): [number, number] => {
      const match = /\$([\d,.]+)(?:–([\d,.]+))?/.exec(cell);
      expect(match, cell).not.toBeNull();
      const low = Number(match?.[1]?.replaceAll(",", ""));
      return [low, match?.[2] ? Number(match[2].replaceAll(",", "")) : low];
    };
    const cents = (n: number) => Math.round(n * 100);
    const perCallEnd = rows.findIndex((cells) => cells[1] === "**per million calls**");
    const perCall = rows.slice(1, perCallEnd);
    expect(perCall.length).toBe(12);
    const totals = [2, 3].map((column) =>
      perCall.reduce<[number, number]>(
        ([low, high], cells) => {
          const [a, b] = dollars(cells[column] ?? "");
          return [low + cents(a), high + cents(b)];
        },
        [0, 0],
      ),
    );
    const stated = [2, 3].map((column) => dollars(rows[perCallEnd]?.[column] ?? "").map(cents));
    expect(totals).toEqual(stated);

    const fixedStart = rows.findIndex((cells) => cells[1] === "fixed, per month");
    const fixedEnd = rows.findIndex((cells) => cells[1]?.startsWith("**fixed, 10 dashboard users"));
    const fixed = rows.slice(fixedStart + 1, fixedEnd).reduce((sum, cells) => {
      const perUser = cells[1]?.includes("per monthly active dashboard user") ? 10 : 1;
      return sum + cents(dollars(cells[2] ?? "")[0]) * perUser;
    }, 0);
    const fixedTotal = cents(dollars(rows[fixedEnd]?.[2] ?? "")[0]);
    expect(fixed).toBe(fixedTotal);

    // The worked month: the per-million lines times the calls plus the fixed month, rounded
    // (to the dollar at 1 M, to ten dollars at 100 M).
    const month = (millions: number, roundTo: number) =>
      [2, 3].map((column) => {
        const [low, high] = dollars(rows[perCallEnd]?.[column] ?? "");
        return [low, high].map(
          (perMillion) => Math.round((perMillion * millions + fixedTotal / 100) / roundTo) * roundTo,
        );
      });
    const worked = (label: string) => {
      const cells = rows.find((each) => each[1] === label);
      return [2, 3].map((column) => dollars(cells?.[column] ?? ""));
    };
    expect(worked("1 million calls")).toEqual(month(1, 1));
    expect(worked("100 million calls")).toEqual(month(100, 10));
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
