import { formatCents, formatUsd } from "../../lambda/core/money";
import { h } from "./dom";

const relative = new Intl.RelativeTimeFormat("en-US", { numeric: "auto" });
const UNITS: [Intl.RelativeTimeFormatUnit, number][] = [
  ["year", 365 * 86_400_000],
  ["month", 30 * 86_400_000],
  ["day", 86_400_000],
  ["hour", 3_600_000],
  ["minute", 60_000],
];

export function relativeTime(ms: number, now = Date.now()): string {
  const delta = ms - now;
  for (const [unit, size] of UNITS) {
    if (Math.abs(delta) >= size) return relative.format(Math.round(delta / size), unit);
  }
  return delta >= 0 ? "in a moment" : "just now";
}

/**
 * The one way the dashboard writes a time: UTC, ISO-like, the zone shown, as the API's days are UTC:
 * `2026-12-07 03:13 UTC`, with `seconds` `2026-12-07 03:13:25 UTC`.
 */
export function formatTime(ms: number, options: { seconds?: boolean } = {}): string {
  const iso = new Date(ms).toISOString();
  return `${iso.slice(0, 10)} ${iso.slice(11, options.seconds ? 19 : 16)} UTC`;
}

/** A UTC day as the dashboard writes it: `2026-12-07`. */
export const formatDate = (ms: number) => new Date(ms).toISOString().slice(0, 10);

/** A chart's day label: the month and day of an ISO day, `12-07` (the year is in the range). */
export const chartDay = (isoDay: string) => isoDay.slice(5);

/** A time (`formatTime`), how long ago or ahead in the tooltip; `fallback` when there is none. */
export function timeCell(
  ms: number | undefined,
  fallback: string,
  options: { seconds?: boolean; now?: number } = {},
): HTMLElement {
  if (ms === undefined) return h("span", { class: "muted" }, fallback);
  return h(
    "time",
    { datetime: new Date(ms).toISOString(), title: relativeTime(ms, options.now) },
    formatTime(ms, options),
  );
}

const integer = new Intl.NumberFormat("en-US");
const compact = new Intl.NumberFormat("en-US", { notation: "compact", maximumFractionDigits: 1 });

/** A count as people read it: `1,234`. */
export function count(value: number): string {
  return integer.format(value);
}

/** A count of something: `1 call`, `1,234 calls`, `2 batches` (with its plural). */
export function counted(value: number, noun: string, plural = `${noun}s`): string {
  return `${count(value)} ${value === 1 ? noun : plural}`;
}

/** A large count in short: `12.3K`, `4.5M`. */
export function shortCount(value: number): string {
  return compact.format(value);
}

/** A duration: `840 ms`, `2.4 s`. */
export function duration(ms: number): string {
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
}

/** A log time (a list spans days): the date and time to the second. */
export const logTime = (ms: number) => timeCell(ms, "", { seconds: true });

/**
 * A summary's amount (a total, a balance, spend per day, model, key or user): to the cent
 * (`formatCents`), with the exact amount on hover (`formatUsd`), so `<$0.01` still says how much.
 */
export function money(micros: number, className?: string): HTMLElement {
  return h(
    "span",
    { class: `money ${className ?? ""}`.trim(), title: formatUsd(micros) },
    formatCents(micros),
  );
}

/**
 * A chart's money labels, for values up to `peakMicros`: to the cent, or, on a chart whose values all
 * stay under a cent (a new project's first calls), to the micro-dollar, where cents would label every
 * line `<$0.01`.
 */
export function chartMoney(peakMicros: number): (micros: number) => string {
  return peakMicros < 10_000 ? (micros) => formatUsd(Math.round(micros)) : formatCents;
}

/** The change from `previous` to `current` as people say it: `+12%`, `-3%`, `new`, or `—` when both are 0. */
export function change(current: number, previous: number): string {
  if (previous === 0) return current === 0 ? "no change" : "new";
  const percent = Math.round((100 * (current - previous)) / previous);
  return `${percent > 0 ? "+" : ""}${percent}%`;
}
