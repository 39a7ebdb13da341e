import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dmtJson, runDmt } from "../support/cli";

/** `dmt settings set|show` for privacy, `dmt keys create|update --store`, `dmt retention run`: no server. */
let dir: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "dmt-cli-privacy-"));
  await dmtJson(["projects", "create", "acme"], dir);
}, 300_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A refusal: one line on stderr, exit 1 (2 for a usage error), nothing on stdout. */
async function refused(args: string[], code: number, says: string | RegExp) {
  const result = await runDmt(args, dir);
  expect(result.code).toBe(code);
  expect(result.stdout).toBe("");
  expect(result.stderr.trimEnd().split("\n")).toHaveLength(1);
  expect(result.stderr).toMatch(says);
}

describe("privacy settings from the CLI", () => {
  it("sets and shows a project's store level and retention", async () => {
    expect(await dmtJson(["settings", "show", "--project", "acme"], dir)).toEqual({
      projectId: "acme",
      store: "full",
      retentionDays: null,
      bodyRetentionDays: null,
    });
    const set = await dmtJson(
      [
        "settings",
        "set",
        "--project",
        "acme",
        "--store",
        "metadata",
        "--retention-days",
        "90",
        "--body-retention-days",
        "7",
      ],
      dir,
    );
    expect(set).toEqual({ projectId: "acme", store: "metadata", retentionDays: 90, bodyRetentionDays: 7 });
    const human = await runDmt(["settings", "show", "--project", "acme"], dir);
    expect(human.stdout).toBe("acme: store level metadata\n  records: 90 days\n  bodies:  7 days\n");
  }, 300_000);

  it("refuses an unknown level, retention of 0 or beyond 10 years, and bodies kept longer than records", async () => {
    const set = ["settings", "set", "--project", "acme"];
    await dmtJson(
      [...set, "--store", "metadata", "--retention-days", "90", "--body-retention-days", "7"],
      dir,
    );
    await refused(
      [...set, "--store", "everything"],
      1,
      "Invalid field 'store': must be one of none, metadata, full.",
    );
    await refused(
      [...set, "--retention-days", "0"],
      1,
      "'retentionDays': must be a whole number of days from 1 to 3650",
    );
    await refused([...set, "--retention-days", "1.5"], 2, "--retention-days must be a whole number");
    // 7 body days are set: the records may not be kept for less.
    await refused(
      [...set, "--retention-days", "5"],
      1,
      "(7) cannot be longer than the record retention (5 days)",
    );
    await refused(set, 2, "give --export-bucket, --no-export-bucket, --store");
    // Nothing refused changed anything.
    expect(await dmtJson(["settings", "show", "--project", "acme"], dir)).toMatchObject({
      store: "metadata",
      retentionDays: 90,
      bodyRetentionDays: 7,
    });
  }, 300_000);

  it("holds a key to less than its project, never more, and lets it follow the project again", async () => {
    const created = await dmtJson<{ id: string }>(
      ["keys", "create", "--project", "acme", "--name", "ci", "--store", "none"],
      dir,
    );
    const listed = await dmtJson<{ keyId: string; store?: string }[]>(
      ["keys", "list", "--project", "acme"],
      dir,
    );
    expect(listed.find((k) => k.keyId === created.id)?.store).toBe("none");
    await refused(
      ["keys", "create", "--project", "acme", "--name", "x", "--store", "full"],
      1,
      "a key's level must be one of none, metadata",
    );
    expect(await dmtJson(["keys", "update", created.id, "--store", "metadata"], dir)).toMatchObject({
      keyId: created.id,
      store: "metadata",
    });
    const back = await dmtJson<{ store?: string }>(["keys", "update", created.id, "--store", "project"], dir);
    expect(back.store).toBeUndefined();
    await refused(
      ["keys", "update", "abcdefghijklmnop", "--store", "none"],
      1,
      "Key 'abcdefghijklmnop' does not exist.",
    );
  }, 300_000);

  it("runs retention dry and for real, leaving an audit entry only for the real run", async () => {
    const dry = await dmtJson<{ dryRun: boolean; projects: { projectId: string }[] }>(
      ["retention", "run", "--project", "acme", "--dry-run"],
      dir,
    );
    expect(dry).toMatchObject({
      dryRun: true,
      status: "completed",
      projects: [{ projectId: "acme", retentionDays: 90 }],
    });
    const real = await runDmt(["retention", "run"], dir);
    expect(real.code).toBe(0);
    expect(real.stdout).toMatch(/^Retention run ret_[0-9a-f]{16} completed/);
    expect(real.stdout).toMatch(/acme\s+90\s+7\s+0\s+0\s+0\s+0/);
    await refused(["retention", "run", "--project", "nope"], 1, "Project 'nope' does not exist.");
  }, 300_000);
});
