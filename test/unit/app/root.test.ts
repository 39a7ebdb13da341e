import { describe, expect, it } from "vitest";
import { createRootApp } from "../../../lambda/app/root";
import { silentLogger } from "../../../lambda/core/logger";

const app = createRootApp(silentLogger);

describe("the service's root", () => {
  it("sends / to the dashboard", async () => {
    const res = await app.request("/");
    expect(res.status).toBe(302);
    expect(res.headers.get("location")).toBe("/dashboard/");
    expect(res.headers.get("x-frame-options")).toBe("DENY");
  });

  it("answers /healthz without a key, uncached", async () => {
    const res = await app.request("/healthz");
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: "ok" });
    expect(res.headers.get("cache-control")).toBe("no-store");
  });

  it("refuses other methods on them with 405 and an Allow header", async () => {
    const res = await app.request("/healthz", { method: "POST" });
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("GET");
  });

  it("answers anything else with the service's 404", async () => {
    const res = await app.request("/nothing/here");
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ error: { type: "not_found_error", code: "not_found" } });
  });
});
