import type { PriceListRow } from "./catalogue";

/** Non-token and tiered prices of a row, in a few words. */
function otherPrices(row: PriceListRow): string {
  const parts: string[] = [];
  if (row.reasoning) parts.push(`reasoning ${row.reasoning}`);
  if (row.cacheWrite1h) parts.push(`1h cache-write ${row.cacheWrite1h}`);
  if (row.audioInput) parts.push(`audio in ${row.audioInput}`);
  if (row.imageInput) parts.push(`image in ${row.imageInput}`);
  if (row.audioOutput) parts.push(`audio out ${row.audioOutput}`);
  for (const [tier, rates] of Object.entries(row.serviceTiers ?? {})) {
    parts.push(`${tier}: ${rates.input}/${rates.cached_input ?? "-"}/${rates.output}`);
  }
  for (const [tool, usd] of Object.entries(row.toolCalls ?? {})) parts.push(`${tool} ${usd}/1K calls`);
  for (const [tool, usd] of Object.entries(row.toolRequests ?? {})) parts.push(`${tool} ${usd}/1K requests`);
  if (row.longContext) {
    const long = row.longContext;
    parts.push(`>${long.aboveInputTokens} in: ${long.input}/${long.output}`);
  }
  if (row.perImage) {
    const each = Object.entries(row.perImage).map(([variant, usd]) =>
      variant === "any" ? usd : `${variant} ${usd}`,
    );
    parts.push(`image ${each.join(", ")}`);
  }
  if (row.audio) {
    const minimum = row.audio.minimumSeconds ? ` (min ${row.audio.minimumSeconds} s)` : "";
    parts.push(`audio ${row.audio.usd}/${row.audio.per}${minimum}`);
  }
  if (row.perMillionCharacters) parts.push(`speech ${row.perMillionCharacters}/1M chars`);
  return parts.join("; ");
}

/**
 * A plain-text table of price rows for `dmt prices list`. Token prices are USD per million tokens,
 * as listed by the vendor (before the deployment's markup); "-" means the field defaults (cached
 * and cache-write tokens at the input rate).
 */
export function formatPriceTable(rows: readonly PriceListRow[]): string {
  const header = [
    "VENDOR",
    "MODEL",
    "KIND",
    "SINCE",
    "INPUT",
    "CACHED",
    "CACHE-WRITE",
    "OUTPUT",
    "MAX-OUT",
    "OTHER",
  ];
  const lines = rows.map((row) => [
    row.vendor,
    row.model,
    row.kind,
    row.effectiveFrom,
    row.input ?? "-",
    row.cachedInput ?? "-",
    row.cacheWrite ?? "-",
    row.output ?? "-",
    row.maxOutputTokens === undefined ? "-" : String(row.maxOutputTokens),
    otherPrices(row),
  ]);
  const widths = header.map((title, i) =>
    Math.max(title.length, ...lines.map((line) => line[i]?.length ?? 0)),
  );
  return [header, ...lines]
    .map((cells) =>
      cells
        .map((cell, i) => cell.padEnd(widths[i] ?? 0))
        .join("  ")
        .trimEnd(),
    )
    .join("\n");
}
