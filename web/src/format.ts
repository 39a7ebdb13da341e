import { h } from "./dom";

const relative = new Intl.RelativeTimeFormat(undefined, { numeric: "auto" });
const absolute = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });
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

/** A time as "3 days ago", with the exact date in a tooltip and for machines. */
export function timeCell(ms: number | undefined, fallback: string): HTMLElement {
  if (ms === undefined) return h("span", { class: "muted" }, fallback);
  const date = new Date(ms);
  return h("time", { datetime: date.toISOString(), title: absolute.format(date) }, relativeTime(ms));
}

const day = new Intl.DateTimeFormat(undefined, { dateStyle: "medium" });

/** A date without its time, with the exact time in a tooltip. */
export function formatDay(ms: number): HTMLElement {
  const date = new Date(ms);
  return h("time", { datetime: date.toISOString(), title: absolute.format(date) }, day.format(date));
}

/** Micro-USD as dollars: `$12.50`, `-$0.000125` (two decimals at least, six at most; no float on the way). */
export function usd(micros: number): string {
  const sign = micros < 0 ? "-" : "";
  const abs = Math.abs(micros);
  const fraction = String(abs % 1_000_000)
    .padStart(6, "0")
    .replace(/0{1,4}$/, "");
  return `${sign}$${Math.floor(abs / 1_000_000).toLocaleString("en-US")}.${fraction}`;
}
