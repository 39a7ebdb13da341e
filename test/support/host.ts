import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DynamoCredits } from "../../lambda/adapters/dynamodb/credits";
import { tableNames } from "../../lambda/adapters/dynamodb/tables";
import type { NewKeyInput } from "../../lambda/core/accounts";
import { createKey, createProject } from "../../lambda/core/accounts";
import { parseUsd } from "../../lambda/core/credits";
import { silentLogger } from "../../lambda/core/logger";
import { parseLocalConfig } from "../../lambda/local/config";
import { type EmbeddedHost, type EmbeddedHostOptions, startEmbeddedHost } from "../../lambda/local/host";

export interface TestHost extends EmbeddedHost {
  dataDir: string;
  /** Creates a project (tier free unless given) and a key for it; returns the full key. */
  newKey(
    input?: Partial<NewKeyInput> & { tier?: string },
  ): Promise<{ key: string; keyId: string; projectId: string }>;
  /** Stops the stack; the data dir is removed unless `keepData`. */
  stop(keepData?: boolean): Promise<void>;
}

let counter = 0;

/** Starts the real local stack (dynalite on a temp dir, port 0) for a test file. */
export async function startTestHost(
  env: Record<string, string> = {},
  dataDir?: string,
  options: EmbeddedHostOptions = {},
): Promise<TestHost> {
  const dir = dataDir ?? mkdtempSync(join(tmpdir(), "dmt-test-"));
  // Metering is off unless a test asks for it: proxy tests need no credits or rate-limit headroom.
  const config = parseLocalConfig({
    PORT: "0",
    DMT_DATA_DIR: dir,
    DMT_KEY_CACHE_MS: "200",
    DMT_METERING: "off",
    // Quiet test output; a test of the access log turns it on.
    DMT_ACCESS_LOG: "off",
    ...env,
  });
  const stack = await startEmbeddedHost(config, silentLogger, options);
  return {
    ...stack,
    dataDir: dir,
    async newKey(input = {}) {
      const projectId = input.projectId ?? `p${process.pid}-${++counter}`;
      if (!(await stack.store.getProject(projectId))) {
        await createProject(stack.store, projectId, input.tier ?? "free", Date.now());
      }
      const { key, record } = await createKey(stack.store, { name: "test", ...input, projectId }, Date.now());
      return { key, keyId: record.keyId, projectId };
    },
    async stop(keepData = false) {
      await stack.close();
      if (!keepData) rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The managed vendor key a test stack gets for `vendor` from `simulatorEnv`. */
export const testVendorKey = (vendor: string) => `sk-test-managed-${vendor}-0123456789`;

/**
 * Environment that points every vendor of a test stack at an external simulator (started by the test,
 * so it can inspect requests and inject faults), with a managed key per vendor.
 */
export function simulatorEnv(origins: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [vendor, origin] of Object.entries(origins)) {
    env[`DMT_UPSTREAM_${vendor.toUpperCase()}`] = origin;
    env[`${vendor.toUpperCase()}_API_KEY`] = testVendorKey(vendor);
  }
  return env;
}

/**
 * The local stack metering calls to the simulator's vendors (its warehouse flushed every 100 ms), and a
 * project's key with `usd` dollars of credits: where the tests of charges through the SDKs start.
 */
export async function startMeteredHost(
  origins: Record<string, string>,
  usd: string,
): Promise<{ stack: TestHost; owner: { key: string; projectId: string }; credits: DynamoCredits }> {
  const stack = await startTestHost({
    ...simulatorEnv(origins),
    DMT_METERING: "on",
    DMT_WAREHOUSE_FLUSH_MS: "100",
  });
  const owner = await stack.newKey();
  const credits = new DynamoCredits(stack.db, tableNames(process.env));
  await credits.grant(owner.projectId, parseUsd(usd), "test");
  return { stack, owner, credits };
}
