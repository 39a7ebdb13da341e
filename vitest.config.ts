import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Timeouts only catch hangs: no test races a clock. They are sized for a 2-core machine busy with other
    // work (load averages of 15-20 seen), where a hook that starts a stack or synthesises a CDK app can
    // take minutes. Files run one at a time (vitest's default on 2 cores: one worker fewer than cores).
    testTimeout: 120_000,
    hookTimeout: 240_000,
    pool: "forks",
    env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true" },
  },
});
