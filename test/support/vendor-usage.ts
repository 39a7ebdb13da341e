/** What the vendor usage tests share: the recorded fixtures, a call's context, an SSE fixture fed to a vendor. */
import { readFileSync } from "node:fs";
import { emptyUsage, type Usage } from "../../lambda/core/usage";
import type { Operation, UsageContext, VendorName } from "../../lambda/core/vendor-model";
import { VENDOR_DEFINITIONS } from "../../lambda/vendors";
import { parseSseEvent, SseReader } from "../../lambda/vendors/sse";

export const fixture = (name: string) => readFileSync(new URL(`../fixtures/${name}`, import.meta.url));

export function context(operation: Operation, request?: Record<string, unknown>): UsageContext {
  return { operation, request };
}

/** Feeds an SSE fixture to the vendor's observer; `events` keeps only the first n events (a cut stream). */
export function observeSse(
  vendor: VendorName,
  ctx: UsageContext,
  name: string,
  events = Number.POSITIVE_INFINITY,
) {
  const observer = VENDOR_DEFINITIONS[vendor].usage.stream(ctx);
  const blocks = new SseReader().blocks(fixture(name)).slice(0, events);
  for (const block of blocks) {
    const event = parseSseEvent(block);
    if (event) observer.event(event.data, event.event);
  }
  return observer.result(events === Number.POSITIVE_INFINITY);
}

export function usage(figures: Partial<Usage>): Usage {
  return { ...emptyUsage(), ...figures };
}
