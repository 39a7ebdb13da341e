import { describe, expect, it } from "vitest";
import { ApiError } from "../../../lambda/core/errors";
import {
  keyStoreLevel,
  lowestLevel,
  mergePrivacySettings,
  requestStoreLevel,
} from "../../../lambda/core/privacy";

const refusal = (run: () => unknown) => {
  try {
    run();
  } catch (err) {
    expect(err).toBeInstanceOf(ApiError);
    return { status: (err as ApiError).status, ...(err as ApiError).toBody().error };
  }
  throw new Error("not refused");
};

describe("store levels", () => {
  it("take the most private of project, key and request", () => {
    expect(lowestLevel("full", "metadata", undefined)).toBe("metadata");
    expect(keyStoreLevel({}, {})).toBe("full");
    expect(keyStoreLevel({ store: "metadata" }, { store: "none" })).toBe("none");
    expect(keyStoreLevel({ store: "none" }, { store: "metadata" })).toBe("none");
    expect(requestStoreLevel("full", undefined)).toBe("full");
    expect(requestStoreLevel("full", "NONE")).toBe("none");
  });

  it("refuse a header that asks for more than the key stores, or for no level", () => {
    expect(refusal(() => requestStoreLevel("metadata", "full"))).toMatchObject({
      status: 400,
      type: "invalid_request_error",
      code: "invalid_header",
    });
    expect(refusal(() => requestStoreLevel("full", "bodies")).message).toContain(
      "must be one of none, metadata, full",
    );
  });
});

describe("privacy settings", () => {
  it("accept 1 to 3650 days, and body retention up to the record retention", () => {
    expect(mergePrivacySettings({}, { store: "none", retentionDays: 3650, bodyRetentionDays: 1 })).toEqual({
      store: "none",
      retentionDays: 3650,
      bodyRetentionDays: 1,
    });
    expect(mergePrivacySettings({ retentionDays: 30 }, { bodyRetentionDays: 30 })).toEqual({
      retentionDays: 30,
      bodyRetentionDays: 30,
    });
    expect(
      mergePrivacySettings({ retentionDays: 30, bodyRetentionDays: 7 }, { retentionDays: null }),
    ).toEqual({
      bodyRetentionDays: 7,
    });
  });

  it.each([
    ["an unknown level", { store: "secret" }, "'store': must be one of none, metadata, full"],
    [
      "a retention of 0",
      { retentionDays: 0 },
      "'retentionDays': must be a whole number of days from 1 to 3650",
    ],
    ["a retention beyond 10 years", { retentionDays: 3651 }, "from 1 to 3650"],
    [
      "a fractional body retention",
      { bodyRetentionDays: 1.5 },
      "'bodyRetentionDays': must be a whole number",
    ],
    ["a retention given as text", { retentionDays: "30" }, "must be a whole number"],
    [
      "a body retention longer than the records'",
      { retentionDays: 7, bodyRetentionDays: 8 },
      "(8) cannot be longer than the record retention (7 days)",
    ],
  ])("refuse %s", (_, change, says) => {
    const refused = refusal(() => mergePrivacySettings({}, change));
    expect(refused).toMatchObject({ status: 400, type: "invalid_request_error", code: "invalid_field" });
    expect(refused.message).toContain(says);
  });

  it("refuse shortening the records below the body retention already set", () => {
    expect(
      refusal(() => mergePrivacySettings({ retentionDays: 30, bodyRetentionDays: 14 }, { retentionDays: 10 }))
        .message,
    ).toContain("(14) cannot be longer than the record retention (10 days)");
  });
});
