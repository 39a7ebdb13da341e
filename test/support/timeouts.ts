/**
 * For a hook or test that bundles every Lambda function with esbuild (a CDK synth with bundling): on a
 * 2-core machine at load average 25, stack.test.ts's took over 5 minutes. It only bounds a hang.
 */
export const BUNDLING_TIMEOUT_MS = 600_000;
