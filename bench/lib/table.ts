/** A plain text table: right-aligned numbers, left-aligned text. */
export function formatTable(columns: string[], rows: (string | number)[][]): string {
  const cells = rows.map((row) => row.map((v) => (typeof v === "number" ? formatNumber(v) : v)));
  const widths = columns.map((c, i) => Math.max(c.length, ...cells.map((r) => (r[i] ?? "").length)));
  const line = (row: string[], numeric: boolean[]) =>
    row.map((v, i) => (numeric[i] ? v.padStart(widths[i] ?? 0) : v.padEnd(widths[i] ?? 0))).join("  ");
  const numeric = rows[0]?.map((v) => typeof v === "number") ?? [];
  return [
    line(columns, numeric),
    line(
      widths.map((w) => "-".repeat(w)),
      numeric,
    ),
    ...cells.map((r) => line(r, numeric)),
  ]
    .map((l) => l.trimEnd())
    .join("\n");
}

function formatNumber(v: number): string {
  if (!Number.isFinite(v)) return String(v);
  if (Number.isInteger(v) && Math.abs(v) < 100) return String(v);
  if (Math.abs(v) >= 100) return Math.round(v).toLocaleString("en-US");
  return v.toFixed(v >= 10 ? 1 : 3);
}
