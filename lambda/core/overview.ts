/**
 * The dashboard's overview: spend over three periods against the period before, the credits left
 * and how long they last at the recent pace, the top models by cost, and the month's cumulative spend.
 * Spend is what managed calls charged to credits (from the daily rollups); BYOK and dual-key calls
 * are shown apart at list price. Integer micro-USD throughout.
 */
import type { CreditBalance } from "./credits";
import { DAY_MS, dayOf, startOfDay } from "./interactions";
import type { Rollup } from "./interactions-usage";

/** Days the burn rate averages over, today included. */
export const BURN_DAYS = 7;
export const TOP_N = 5;

export interface PeriodSpend {
  from: string;
  to: string;
  micros: number;
  /** The same length of time just before (for a month: the same days of the previous month). */
  previousMicros: number;
}

export interface TopModel {
  vendor: string;
  model: string | null;
  costMicros: number;
  requests: number;
  /** Of the requests, those dmt refused itself (credits, budget, rate limit, policy). */
  refused: number;
}

export interface Overview {
  today: string;
  spend: { today: PeriodSpend; month: PeriodSpend; last30: PeriodSpend };
  /** BYOK and dual-key calls of the last 30 days at list price: not charged to credits. */
  listPriceUnchargedMicros: number;
  credits: {
    availableMicros: number;
    heldMicros: number;
    /** The average charged a day over the last BURN_DAYS days, today included. */
    burnPerDayMicros: number;
    /** Whole days the available credits last at that rate; null when nothing is being spent. */
    runwayDays: number | null;
  };
  /** Over the last 30 days, by cost then requests; at most TOP_N. */
  topModels: TopModel[];
  /** The month to date: one day each, and the spend summed up to it. */
  month: { days: string[]; cumulativeMicros: number[] };
}

const addDays = (ms: number, days: number) => ms + days * DAY_MS;

/** The first day the overview's rollups must cover for `now`: the previous month or 59 days back. */
export function overviewSince(now: number): string {
  const today = startOfDay(now);
  const date = new Date(today);
  const previousMonth = Date.UTC(date.getUTCFullYear(), date.getUTCMonth() - 1, 1);
  return dayOf(Math.min(previousMonth, addDays(today, -59)));
}

export function buildOverview(
  rollups: readonly Rollup[],
  balance: Pick<CreditBalance, "availableMicros" | "heldMicros">,
  now: number,
): Overview {
  const today = startOfDay(now);
  const date = new Date(today);
  const monthStart = Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), 1);
  const previousMonthStart = Date.UTC(date.getUTCFullYear(), date.getUTCMonth() - 1, 1);
  // The same days of the previous month, cut at its end (March 31 compares with February 1-28).
  const previousMonthEnd = Math.min(
    addDays(previousMonthStart, (today - monthStart) / DAY_MS),
    addDays(monthStart, -1),
  );

  const charged = new Map<string, number>();
  let uncharged = 0;
  const models = new Map<string, TopModel>();
  const last30From = dayOf(addDays(today, -29));
  for (const r of rollups) {
    if (r.billing_mode === "managed") charged.set(r.day, (charged.get(r.day) ?? 0) + r.cost_micros);
    if (r.day < last30From || r.day > dayOf(today)) continue;
    if (r.billing_mode !== "managed") uncharged += r.cost_micros;
    const id = JSON.stringify([r.vendor, r.model]);
    const top = models.get(id) ?? {
      vendor: r.vendor,
      model: r.model,
      costMicros: 0,
      requests: 0,
      refused: 0,
    };
    top.costMicros += r.cost_micros;
    top.requests += r.requests;
    top.refused += r.refused;
    models.set(id, top);
  }
  const sum = (from: number, to: number) => {
    let total = 0;
    for (let d = from; d <= to; d = addDays(d, 1)) total += charged.get(dayOf(d)) ?? 0;
    return total;
  };
  const period = (from: number, to: number, previousFrom: number, previousTo: number): PeriodSpend => ({
    from: dayOf(from),
    to: dayOf(to),
    micros: sum(from, to),
    previousMicros: sum(previousFrom, previousTo),
  });

  const burnPerDayMicros = Math.round(sum(addDays(today, 1 - BURN_DAYS), today) / BURN_DAYS);
  const days: string[] = [];
  const cumulativeMicros: number[] = [];
  let running = 0;
  for (let d = monthStart; d <= today; d = addDays(d, 1)) {
    running += charged.get(dayOf(d)) ?? 0;
    days.push(dayOf(d));
    cumulativeMicros.push(running);
  }
  return {
    today: dayOf(today),
    spend: {
      today: period(today, today, addDays(today, -1), addDays(today, -1)),
      month: period(monthStart, today, previousMonthStart, previousMonthEnd),
      last30: period(addDays(today, -29), today, addDays(today, -59), addDays(today, -30)),
    },
    listPriceUnchargedMicros: uncharged,
    credits: {
      availableMicros: balance.availableMicros,
      heldMicros: balance.heldMicros,
      burnPerDayMicros,
      runwayDays:
        burnPerDayMicros > 0 ? Math.floor(Math.max(0, balance.availableMicros) / burnPerDayMicros) : null,
    },
    topModels: [...models.values()]
      .filter((m) => m.costMicros > 0 || m.requests > 0)
      .sort((a, b) => b.costMicros - a.costMicros || b.requests - a.requests)
      .slice(0, TOP_N),
    month: { days, cumulativeMicros },
  };
}
