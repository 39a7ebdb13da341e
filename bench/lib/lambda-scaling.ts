/**
 * Lambda's concurrency scaling rate for one function, as documented: "your concurrency scaling rate is
 * 1,000 execution environment instances every 10 seconds"; Lambda "makes a best attempt to refill your
 * concurrency scaling rate continuously over time, rather than in one burst of 1,000 units every 10
 * seconds", and does not accumulate unused parts: "at any given time, your scaling rate is always 1,000
 * concurrency units maximum". Requests that come in faster than the function can scale "fail with a
 * throttling error (429 status code)". https://docs.aws.amazon.com/lambda/latest/dg/scaling-behavior.html
 * ("Lambda scaling behavior", "Concurrency scaling rate", read 2026-12-07).
 *
 * So a token bucket: 1,000 new environments at most at once (a function idle long enough starts with
 * the whole 1,000), refilled at 100 a second. A warm environment freed by a call that ended is reused
 * without a token.
 */
export class LambdaScaling {
  private tokens: number;
  private at: number;

  constructor(
    now: number,
    private readonly burst = 1_000,
    private readonly perSecond = 100,
  ) {
    this.tokens = burst;
    this.at = now;
  }

  /** Whether Lambda may start one more execution environment now (and counts it if so). */
  tryStart(now: number): boolean {
    if (now > this.at) {
      this.tokens = Math.min(this.burst, this.tokens + ((now - this.at) / 1000) * this.perSecond);
      this.at = now;
    }
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }
}
