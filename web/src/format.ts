import { formatCents, formatUsd } from "../../lambda/core/money";
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
