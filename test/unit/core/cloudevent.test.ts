import { describe, expect, it } from "vitest";
import { buildEvent, DEFAULT_EVENT_TYPES, parseEventTypes } from "../../../lambda/core/cloudevent";
import { decimalUsd as usd } from "../../../lambda/core/credits";
import { ApiError } from "../../../lambda/core/errors";

function refusal(fn: () => unknown): { status: number; code: string; message: string } {
  try {
    fn();
  } catch (err) {
    if (err instanceof ApiError) return { status: err.status, code: err.code, message: err.message };
    throw err;
  }
  throw new Error("expected a refusal");
}

describe("CloudEvents", () => {
  it("builds a CloudEvents 1.0 event with a time-ordered id", () => {
    const event = buildEvent(
      { type: "key.created", projectId: "acme", subject: "k1", data: { a: 1 } },
      1_700_000_000_000,
    );
    expect(event).toEqual({
      specversion: "1.0",
      type: "key.created",
      source: "/projects/acme",
      id: expect.stringMatching(/^evt_[0-9a-z]{9}[0-9a-f]{16}$/),
      time: "2023-11-14T22:13:20.000Z",
      subject: "k1",
      datacontenttype: "application/json",
      projectid: "acme",
      data: { a: 1 },
    });
    const later = buildEvent({ type: "key.created", projectId: "acme", data: {} }, 1_700_000_000_001);
    expect(later.id > event.id).toBe(true);
  });

  it("gives every event of the same millisecond its own id", () => {
    const ids = new Set(
      Array.from(
        { length: 2_000 },
        () => buildEvent({ type: "key.created", projectId: "acme", data: {} }, 1).id,
      ),
    );
    expect(ids.size).toBe(2_000);
  });

  it("parses event type lists and refuses unknown types by name", () => {
    expect(parseEventTypes("balance.low, key.created,balance.low")).toEqual(["balance.low", "key.created"]);
    expect(refusal(() => parseEventTypes("balance.low,budget.exploded"))).toMatchObject({
      status: 400,
      code: "invalid_field",
      message: expect.stringContaining("unknown event type 'budget.exploded'"),
    });
    expect(refusal(() => parseEventTypes(""))).toMatchObject({ code: "invalid_field" });
    expect(refusal(() => parseEventTypes(["webhook.test"]))).toMatchObject({ code: "invalid_field" });
    expect(DEFAULT_EVENT_TYPES).not.toContain("usage.recorded");
  });

  it("writes money as exact decimal strings", () => {
    expect(usd(12_500_000)).toBe("12.50");
    expect(usd(1)).toBe("0.000001");
    expect(usd(-2_000_000)).toBe("-2.00");
  });
});
