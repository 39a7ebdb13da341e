import { describe, expect, it } from "vitest";
import { LambdaScaling } from "../../../../bench/lib/lambda-scaling";

const T0 = Date.UTC(2026, 11, 7, 12);

function started(scaling: LambdaScaling, now: number, asked: number): number {
  let n = 0;
  for (let i = 0; i < asked; i++) if (scaling.tryStart(now)) n++;
  return n;
}

describe("LambdaScaling (the scale model's Lambda scaling rate)", () => {
  it("starts at most 1,000 environments at once from cold", () => {
    const scaling = new LambdaScaling(T0);
    expect(started(scaling, T0, 1_500)).toBe(1_000);
    expect(scaling.tryStart(T0)).toBe(false);
  });

  it("refills continuously at 1,000 every 10 seconds: 100 a second, 10 per 100 ms", () => {
    const scaling = new LambdaScaling(T0);
    started(scaling, T0, 1_000);
    expect(started(scaling, T0 + 100, 50)).toBe(10);
    expect(started(scaling, T0 + 1_100, 500)).toBe(100);
    expect(started(scaling, T0 + 11_100, 5_000)).toBe(1_000);
  });

  it("does not accumulate unused scaling past 1,000", () => {
    const scaling = new LambdaScaling(T0);
    expect(started(scaling, T0 + 60_000, 3_000)).toBe(1_000);
  });
});
