import { readFileSync } from "node:fs";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseSseEvent, SseReader } from "../../../lambda/vendors/sse";

const fixture = (name: string) => readFileSync(new URL(`../../fixtures/${name}`, import.meta.url));

/** The bytes cut at the given offsets (sorted, deduplicated, inside the buffer). */
function cut(bytes: Buffer, offsets: number[]): Buffer[] {
  const points = [...new Set(offsets.map((o) => o % (bytes.length + 1)))].sort((a, b) => a - b);
  const parts: Buffer[] = [];
  let at = 0;
  for (const point of points) {
    parts.push(bytes.subarray(at, point));
    at = point;
  }
  parts.push(bytes.subarray(at));
  return parts;
}

function sseEvents(parts: Buffer[]) {
  const reader = new SseReader();
  const events = parts.flatMap((part) => reader.blocks(part)).map(parseSseEvent);
  return { events, rest: reader.rest() };
}

describe("SseReader", () => {
  it("splits events on blank lines, whatever the line endings", () => {
    const { events } = sseEvents([
      Buffer.from("event: a\ndata: 1\n\ndata: 2\r\n\r\ndata: 3\r\rdata: x\ndata: y\n\n"),
    ]);
    expect(events).toEqual([
      { event: "a", data: "1" },
      { event: undefined, data: "2" },
      { event: undefined, data: "3" },
      { event: undefined, data: "x\ny" },
    ]);
  });

  it("ignores comments and events without data, and keeps a cut event as the rest", () => {
    const { events, rest } = sseEvents([
      Buffer.from(": keep-alive\n\nevent: ping\n\ndata: whole\n\ndata: cut"),
    ]);
    expect(events).toEqual([undefined, undefined, { event: undefined, data: "whole" }]);
    expect(rest).toBe("data: cut");
  });

  it("reads the same events however the bytes are chunked (UTF-8 and CRLF split included)", () => {
    for (const name of [
      "openai-chat.sse",
      "anthropic-messages.sse",
      "gemini-stream.sse",
      "openai-responses.sse",
    ]) {
      const bytes = fixture(name);
      const whole = sseEvents([bytes]).events;
      expect(whole.length).toBeGreaterThanOrEqual(3);
      fc.assert(
        fc.property(fc.array(fc.nat(), { maxLength: 40 }), (offsets) => {
          expect(sseEvents(cut(bytes, offsets)).events).toEqual(whole);
        }),
        { numRuns: 200 },
      );
    }
  });

  it("hands out an event as soon as its blank line arrives", () => {
    const reader = new SseReader();
    expect(reader.blocks(Buffer.from("data: 1\n"))).toEqual([]);
    expect(reader.blocks(Buffer.from("\ndata: 2"))).toEqual(["data: 1\n\n"]);
  });
});
