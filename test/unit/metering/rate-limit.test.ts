import { describe, expect, it } from "vitest";
import { MemoryRateLimiter } from "../../../lambda/adapters/memory/rate-limit";
import { appShell } from "../../../lambda/app/shell";
import type { AuthContext } from "../../../lambda/core/auth";
import { silentLogger } from "../../../lambda/core/logger";
import { checkRateLimit, rateLimitMiddleware } from "../../../lambda/metering/rate-limit";

/** The per-key rate limit, over the memory limiter: one bucket per key, and the data API's middleware. */

const T0 = Date.UTC(2026, 10, 22, 12);

const auth = (keyId: string, rpm = 60, burst = 2): AuthContext => ({
  projectId: "proj",
  keyId,
  tier: "free",
  rateLimit: { rpm, burst },
  store: "full",
});

describe("checkRateLimit", () => {
  it("keeps one bucket per key, shared by every endpoint the key calls", async () => {
    let now = T0;
    const limiter = new MemoryRateLimiter(() => now);
    expect((await checkRateLimit(limiter, auth("key-a"))).allowed).toBe(true);
    expect((await checkRateLimit(limiter, auth("key-a"))).allowed).toBe(true);
    expect(await checkRateLimit(limiter, auth("key-a"))).toMatchObject({
      allowed: false,
      retryAfterSeconds: 1,
    });
    expect((await checkRateLimit(limiter, auth("key-b"))).allowed).toBe(true);
    now += 1_000;
    expect((await checkRateLimit(limiter, auth("key-a"))).allowed).toBe(true);
  });
});

describe("rateLimitMiddleware (the data API)", () => {
  function app(limiter: MemoryRateLimiter) {
    let ran = 0;
    const shell = appShell(silentLogger);
    shell.use("*", async (c, next) => {
      c.set("auth", auth(c.req.header("x-key") ?? "key-a"));
      await next();
    });
    shell.use("*", rateLimitMiddleware(limiter));
    shell.post("/export", (c) => {
      ran++;
      return c.json({ started: true });
    });
    shell.get("/boom", () => {
      throw new Error("route failed");
    });
    return { shell, ran: () => ran };
  }

  it("puts the X-RateLimit headers on answers, and refuses 429 with Retry-After before the route runs", async () => {
    const limiter = new MemoryRateLimiter(() => T0);
    const { shell, ran } = app(limiter);
    const first = await shell.request("/export", { method: "POST" });
    expect(first.status).toBe(200);
    expect(first.headers.get("X-RateLimit-Limit")).toBe("60");
    expect(first.headers.get("X-RateLimit-Remaining")).toBe("1");
    expect((await shell.request("/export", { method: "POST" })).status).toBe(200);

    const refused = await shell.request("/export", { method: "POST" });
    expect(refused.status).toBe(429);
    expect(refused.headers.get("Retry-After")).toBe("1");
    expect(await refused.json()).toMatchObject({
      error: { type: "rate_limit_error", code: "rate_limit_exceeded" },
    });
    // A refused export never started.
    expect(ran()).toBe(2);
  });

  it("keeps the headers on the route's own errors", async () => {
    const { shell } = app(new MemoryRateLimiter(() => T0));
    const failed = await shell.request("/boom", { headers: { "x-key": "key-c" } });
    expect(failed.status).toBe(500);
    expect(failed.headers.get("X-RateLimit-Remaining")).toBe("1");
  });
});
