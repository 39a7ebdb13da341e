import { describe, expect, it } from "vitest";
import { combineHooks, PendingWork, type ProxyCall, type ProxyHooks } from "../../../lambda/core/call";
import { silentLogger } from "../../../lambda/core/logger";

describe("combineHooks", () => {
  const call = {} as ProxyCall;

  it("merges befores in order, stops at a replay, and runs every after even when one fails", async () => {
    const seen: string[] = [];
    const first: ProxyHooks = {
      async before() {
        seen.push("before 1");
        return { vendorKey: "sk-a", keepResponseBytes: 10 };
      },
      after() {
        seen.push("after 1");
        throw new Error("boom");
      },
    };
    const second: ProxyHooks = {
      async before() {
        seen.push("before 2");
        return { keepResponseBytes: 5 };
      },
      async after() {
        seen.push("after 2");
      },
    };
    const hooks = combineHooks([first, second], silentLogger);
    expect(await hooks.before?.(call)).toEqual({ vendorKey: "sk-a", keepResponseBytes: 10 });
    await hooks.after?.(call, {} as never);
    expect(seen).toEqual(["before 1", "before 2", "after 1", "after 2"]);

    const replay = { status: 200, headers: [], chunks: [] };
    const replaying = combineHooks([{ before: async () => ({ replay }) }, second], silentLogger);
    seen.length = 0;
    expect(await replaying.before?.(call)).toEqual({ replay });
    expect(seen).toEqual([]);
  });
});

describe("PendingWork", () => {
  it("drains work added while draining", async () => {
    const pending = new PendingWork();
    const done: string[] = [];
    let release: () => void = () => {};
    pending.add(
      new Promise<void>((resolve) => {
        release = resolve;
      }).then(() => {
        done.push("first");
        pending.add(Promise.resolve().then(() => void done.push("second")));
      }),
    );
    const drained = pending.drain().then(() => done.push("drained"));
    release();
    await drained;
    expect(done).toEqual(["first", "second", "drained"]);
  });
});
