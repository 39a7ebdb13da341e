import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { emptyUsage, type Usage } from "../../../lambda/core/usage";
import type { Operation, UsageContext, VendorName } from "../../../lambda/core/vendor-model";
import { VENDOR_DEFINITIONS } from "../../../lambda/vendors";
import { parseSseEvent, SseReader } from "../../../lambda/vendors/sse";

const fixture = (name: string) => readFileSync(new URL(`../../fixtures/${name}`, import.meta.url));

function context(operation: Operation, request?: Record<string, unknown>): UsageContext {
  return { operation, request };
}

/** Feeds an SSE fixture to the vendor's observer; `events` keeps only the first n events (a cut stream). */
function observeSse(vendor: VendorName, ctx: UsageContext, name: string, events = Number.POSITIVE_INFINITY) {
  const observer = VENDOR_DEFINITIONS[vendor].usage.stream(ctx);
  const blocks = new SseReader().blocks(fixture(name)).slice(0, events);
  for (const block of blocks) {
    const event = parseSseEvent(block);
    if (event) observer.event(event.data, event.event);
  }
  return observer.result(events === Number.POSITIVE_INFINITY);
}

function usage(figures: Partial<Usage>): Usage {
  return { ...emptyUsage(), ...figures };
}

describe("Groq usage", () => {
  it("reads x_groq.usage from the last chunk", () => {
    const { usage: got, message } = observeSse("groq", context("chat"), "groq-chat.sse");
    expect(got).toEqual(usage({ inputTokens: 18, outputTokens: 3 }));
    expect((message as { choices: { message: { content: string } }[] }).choices[0]?.message.content).toBe(
      "Fast inference.",
    );
  });
});
