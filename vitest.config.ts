import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Integration tests start real servers and stores: give them room, but never rely on wall-clock budgets.
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: "forks",
    env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true" },
  },
});
