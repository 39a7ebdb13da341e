import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Timeouts only catch hangs: no test races a clock. They are sized for a 2-core machine busy with other
    // work (load averages of 15-20 seen), where a hook that starts a stack or synthesises a CDK app can
    // take minutes.
    testTimeout: 120_000,
    hookTimeout: 240_000,
    // expect.poll without options would give up after 1 s: on a busy machine that is a race with the
    // clock, not a check. A poll keeps asking until this bound, which only a broken behaviour reaches.
    expect: { poll: { timeout: 60_000, interval: 50 } },
    pool: "forks",
    // Two files at a time even on 2 cores (vitest's default there is one): much of a file's time is spent
    // waiting on child processes, worker threads and sockets, so a second file fills the idle core.
    maxWorkers: 2,
    env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true" },
  },
});
