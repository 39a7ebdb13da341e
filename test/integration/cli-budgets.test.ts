import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BudgetView } from "../../lambda/core/budgets";
import { dmtJson, runDmt } from "../support/cli";
import { startTestHost, type TestHost } from "../support/host";

/**
 * `dmt budgets set|list|delete` and the key policy options. A server holds the data dir, so each
 * command uses its store rather than starting one of its own.
 */
let stack: TestHost;
let dir: string;
let keyId: string;
let otherKeyId: string;

beforeAll(async () => {
  stack = await startTestHost();
  dir = stack.dataDir;
  keyId = (await stack.newKey({ projectId: "acme" })).keyId;
  otherKeyId = (await stack.newKey({ projectId: "other" })).keyId;
});
afterAll(() => stack.stop());

// Each command is a whole process: on a busy machine a handful of them take well over a minute.
describe("dmt budgets", { timeout: 300_000 }, () => {
  it("sets, lists and deletes budgets of each scope; setting the same one again changes its limit", async () => {
    const project = await dmtJson<BudgetView>(
      ["budgets", "set", "--project", "acme", "--usd", "500", "--window", "month"],
      dir,
    );
    expect(project).toMatchObject({ scope: "project", window: "month", limit_usd: "500.00", soft: false });
    expect(project.id).toMatch(/^acme\.[a-z0-9]{8}$/);
    const key = await dmtJson<BudgetView>(
      [
        "budgets",
        "set",
        "--project",
        "acme",
        "--key",
        keyId,
        "--usd",
        "20",
        "--window",
        "day",
        "--include-byok",
      ],
      dir,
    );
    expect(key).toMatchObject({ scope: "key", key: keyId, include_byok: true });
    const user = await dmtJson<BudgetView>(
      ["budgets", "set", "--project", "acme", "--user", "alice", "--usd", "1", "--window", "month", "--soft"],
      dir,
    );
    expect(user).toMatchObject({ scope: "user", user: "alice", soft: true });
    const again = await dmtJson<BudgetView>(
      ["budgets", "set", "--project", "acme", "--usd", "450.5", "--window", "month"],
      dir,
    );
    expect(again).toMatchObject({ id: project.id, limit_usd: "450.50" });

    const listed = await dmtJson<BudgetView[]>(["budgets", "list", "--project", "acme"], dir);
    expect(listed.map((b) => b.id).sort()).toEqual([project.id, key.id, user.id].sort());
    for (const b of listed) expect(b).toMatchObject({ spent_usd: "0.00", held_usd: "0.00" });
    const human = await runDmt(["budgets", "list", "--project", "acme"], dir);
    expect(human.stdout).toMatch(/^id\s+scope\s+subject\s+window\s+limit\s+spent/);
    expect(human.stdout).toContain("$450.50");

    expect(await dmtJson(["budgets", "delete", key.id], dir)).toEqual({ id: key.id, deleted: true });
    expect((await dmtJson<BudgetView[]>(["budgets", "list", "--project", "acme"], dir)).length).toBe(2);
    const missing = await runDmt(["budgets", "delete", key.id], dir);
    expect(missing).toMatchObject({ code: 1, stderr: `dmt: Budget '${key.id}' does not exist.\n` });
  });

  it.each([
    [["--usd", "0", "--window", "day"], /limit must be more than \$0/],
    [["--usd=-5", "--window", "day"], /limit must be more than \$0/],
    [["--usd", "5", "--window", "week"], /'window': must be one of day, month, total/],
  ])("refuses a bad budget %j with one line and exit 1", async (args, message) => {
    const result = await runDmt(["budgets", "set", "--project", "acme", ...args], dir);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(message);
    expect(result.stderr.trim().split("\n")).toHaveLength(1);
  });

  it("refuses a key of another project, and --key with --user", async () => {
    const foreign = await runDmt(
      ["budgets", "set", "--project", "acme", "--key", otherKeyId, "--usd", "5", "--window", "day"],
      dir,
    );
    expect(foreign.code).toBe(1);
    expect(foreign.stderr).toContain("belongs to another project");
    const both = await runDmt(
      [
        "budgets",
        "set",
        "--project",
        "acme",
        "--key",
        keyId,
        "--user",
        "bob",
        "--usd",
        "5",
        "--window",
        "day",
      ],
      dir,
    );
    expect(both.code).toBe(2);
    expect(both.stderr).toContain("give --key or --user, not both");
  });
});

describe("dmt keys: models and tpm", { timeout: 300_000 }, () => {
  it("creates a key with policies, updates them, and warns about a glob that matches no model", async () => {
    const created = await runDmt(
      [
        "keys",
        "create",
        "--project",
        "acme",
        "--name",
        "p",
        "--models",
        "gpt-4o*,claude-*",
        "--tpm",
        "5000",
        "--json",
      ],
      dir,
    );
    expect(created).toMatchObject({ code: 0, stderr: "" });
    const id = (JSON.parse(created.stdout) as { id: string }).id;
    const listed = await dmtJson<{ keyId: string; models?: string[]; tpm?: number }[]>(
      ["keys", "list", "--project", "acme"],
      dir,
    );
    expect(listed.find((k) => k.keyId === id)).toMatchObject({ models: ["gpt-4o*", "claude-*"], tpm: 5000 });

    const updated = await runDmt(["keys", "update", id, "--models", "no-such-model-*", "--json"], dir);
    expect(updated.code).toBe(0);
    expect(updated.stderr).toBe("dmt: warning: 'no-such-model-*' matches no model of the price catalogue\n");
    expect(JSON.parse(updated.stdout)).toMatchObject({ models: ["no-such-model-*"], tpm: 5000 });

    const cleared = await dmtJson<{ models?: string[]; tpm?: number }>(
      ["keys", "update", id, "--models", "*", "--tpm", "0"],
      dir,
    );
    expect(cleared.models).toBeUndefined();
    expect(cleared.tpm).toBeUndefined();
  });

  it("refuses a TPM above the cap, and an update of a key that does not exist", async () => {
    const tooMany = await runDmt(["keys", "update", keyId, "--tpm", "100000001"], dir);
    expect(tooMany).toMatchObject({ code: 1 });
    expect(tooMany.stderr).toContain("Invalid field 'tpm': must be a whole number from 1 to 100000000");
    const create = await runDmt(
      ["keys", "create", "--project", "acme", "--name", "t", "--tpm", "100000001"],
      dir,
    );
    expect(create.code).toBe(1);
    const missing = await runDmt(["keys", "update", "aaaaaaaaaaaaaaaa", "--tpm", "10"], dir);
    expect(missing).toMatchObject({ code: 1, stderr: "dmt: Key 'aaaaaaaaaaaaaaaa' does not exist.\n" });
    const nothing = await runDmt(["keys", "update", keyId], dir);
    expect(nothing.code).toBe(2);
  });
});
