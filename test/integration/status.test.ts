import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";

let stack: TestHost;
beforeAll(async () => {
  stack = await startTestHost();
});
afterAll(() => stack.stop());

describe("GET /api/v1/status", () => {
  it("returns the project of a valid key", async () => {
    const { key, projectId } = await stack.newKey();
    const res = await fetch(`${stack.url}/api/v1/status`, { headers: { Authorization: `Bearer ${key}` } });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: "ok", project: projectId });
  });

  it("refuses an invalid key with the spec's error", async () => {
    const res = await fetch(`${stack.url}/api/v1/status`, { headers: { Authorization: "Bearer dmt_nope" } });
    expect(res.status).toBe(401);
    expect(await res.json()).toEqual({
      error: { message: "Invalid API key provided.", type: "authentication_error", code: "invalid_api_key" },
    });
  });
});
