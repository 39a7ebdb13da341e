/** Output helpers the commands share. */

/** Rows as aligned columns; a missing cell is `-`, no rows is `(none)`. */
export function table(rows: Record<string, unknown>[], columns: string[]): string {
  if (rows.length === 0) return "(none)";
  const cells = rows.map((row) => columns.map((c) => (row[c] === undefined ? "-" : String(row[c]))));
  const widths = columns.map((c, i) => Math.max(c.length, ...cells.map((r) => (r[i] ?? "").length)));
  const line = (r: string[]) =>
    r
      .map((v, i) => v.padEnd(widths[i] ?? 0))
      .join("  ")
      .trimEnd();
  return [line(columns), ...cells.map(line)].join("\n");
}

/** A time in milliseconds as ISO 8601, or undefined (a `-` cell). */
export const iso = (ms: number | undefined) =>
  typeof ms === "number" ? new Date(ms).toISOString() : undefined;

/** Warnings on stderr: the output a script reads stays as it is. */
export function warn(lines: string[]): void {
  for (const line of lines) process.stderr.write(`dmt: warning: ${line}\n`);
}
