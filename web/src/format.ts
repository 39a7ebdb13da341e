import { formatCents } from "../../lambda/core/money";
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

const integer = new Intl.NumberFormat("en-US");
const compact = new Intl.NumberFormat("en-US", { notation: "compact", maximumFractionDigits: 1 });

/** A count as people read it: `1,234`. */
export function count(value: number): string {
  return integer.format(value);
}

/** A count of something: `1 call`, `1,234 calls`. */
export function counted(value: number, noun: string): string {
  return `${count(value)} ${noun}${value === 1 ? "" : "s"}`;
}

/** A large count in short: `12.3K`, `4.5M`. */
export function shortCount(value: number): string {
  return compact.format(value);
}

/** A duration: `840 ms`, `2.4 s`. */
export function duration(ms: number): string {
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
}

/** Micro-USD as dollars with the precision the amount needs: `$0.000125` below a cent, else `$12.50`. */
export function usdShort(micros: number): string {
  return Math.abs(micros) < 10_000 ? usd(micros) : usd(Math.round(micros / 10_000) * 10_000);
}

const dated = new Intl.DateTimeFormat(undefined, {
  month: "short",
  day: "numeric",
  hour: "2-digit",
  minute: "2-digit",
  second: "2-digit",
});

/** A log time: always the date with the time (a list spans days); exact and relative in a tooltip. */
export function logTime(ms: number, now = Date.now()): HTMLElement {
  const date = new Date(ms);
  return h(
    "time",
    { datetime: date.toISOString(), title: `${absolute.format(date)} (${relativeTime(ms, now)})` },
    dated.format(date),
  );
}

/**
 * An amount with its full precision on hover: to the cent by default (`$5.10`, title `$5.100227`),
 * or as `usdShort` shows it where sub-cent figures matter (a new project's first calls).
 */
export function money(
  micros: number,
  options: { className?: string; format?: (micros: number) => string } = {},
) {
  const text = (options.format ?? formatCents)(micros);
  return h("span", { class: `money ${options.className ?? ""}`.trim(), title: usd(micros) }, text);
}

/** The change from `previous` to `current` as people say it: `+12%`, `-3%`, `new`, or `—` when both are 0. */
export function change(current: number, previous: number): string {
  if (previous === 0) return current === 0 ? "no change" : "new";
  const percent = Math.round((100 * (current - previous)) / previous);
  return `${percent > 0 ? "+" : ""}${percent}%`;
}
