import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runDmt } from "../support/cli";

let dataDir: string;
const dmt = (args: string[], input?: string) => runDmt(args, dataDir, input === undefined ? {} : { input });

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), "dmt-cli-metering-"));
  expect((await dmt(["projects", "create", "acme"])).code).toBe(0);
});
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

describe("dmt credits", () => {
  it("grants, shows the balance and the ledger with the grant's source and note", async () => {
    const grant = await dmt([
      "credits",
      "grant",
      "--project",
      "acme",
      "--usd",
      "12.50",
      "--note",
      "welcome",
      "--json",
    ]);
    expect(grant.code).toBe(0);
    expect(JSON.parse(grant.stdout).balance.availableMicros).toBe(12_500_000);
    const balance = await dmt(["credits", "balance", "--project", "acme"]);
    expect(balance.stdout).toContain("available $12.50");
    const statement = JSON.parse((await dmt(["credits", "ledger", "--project", "acme", "--json"])).stdout);
    expect(statement).toMatchObject({ grouping: "day", openingMicros: 0, closingMicros: 12_500_000 });
    expect(statement.lines).toEqual([
      expect.objectContaining({
        kind: "grant",
        amountMicros: 12_500_000,
        balanceMicros: 12_500_000,
        source: "cli",
        note: "welcome",
      }),
    ]);
    const human = (await dmt(["credits", "ledger", "--project", "acme"])).stdout;
    expect(human).toMatch(/^date\s+description\s+amount\s+balance\n/);
    expect(human).toMatch(/opening balance\s+\$0\.00\n/);
    expect(human).toMatch(/credits granted · cli · welcome\s+\+\$12\.50\s+\$12\.50\n/);
    expect(human).toContain("Available now: $12.50.");
  });

  it.each([
    [["--by", "week"], "Invalid field 'group': must be day or lease."],
    [["--from", "2026-02-30"], "Invalid field 'from': 2026-02-30 is not a calendar date."],
    [
      ["--from", "2026-11-02", "--to", "2026-11-01"],
      "Invalid field 'from': 2026-11-02 is after to 2026-11-01.",
    ],
  ])("refuses the statement period %j with one line and exit 1", async (args, message) => {
    const res = await dmt(["credits", "ledger", "--project", "acme", ...args]);
    expect(res.code).toBe(1);
    expect(res.stderr).toBe(`dmt: ${message}\n`);
  });

  it.each([
    [["--usd", "ten"], "Invalid field 'usd'"],
    [["--usd=-3"], "Invalid field 'usd'"],
    [["--usd", "0"], "Invalid field 'usd'"],
    [["--usd", "1.0000001"], "Invalid field 'usd'"],
    [["--usd", "99999999999"], "Invalid field 'usd'"],
  ])("refuses the amount %j with one line and exit 1", async (args, message) => {
    const res = await dmt(["credits", "grant", "--project", "acme", ...args]);
    expect(res.code).toBe(1);
    expect(res.stderr.trim().split("\n")).toHaveLength(1);
    expect(res.stderr).toContain(message);
  });

  it("refuses an unknown project", async () => {
    const res = await dmt(["credits", "balance", "--project", "ghost"]);
    expect(res.code).toBe(1);
    expect(res.stderr).toBe("dmt: Project 'ghost' does not exist.\n");
  });
});

describe("dmt vendor-keys", () => {
  const secret = "sk-proj-abcdefghijklmnop1234WXYZ";

  it("stores a key from stdin, lists only its last 4 characters, deletes it", async () => {
    const set = await dmt(
      ["vendor-keys", "set", "--project", "acme", "--vendor", "openai", "--json"],
      `${secret}\n`,
    );
    expect(set.code).toBe(0);
    expect(set.stdout).not.toContain(secret);
    const list = await dmt(["vendor-keys", "list", "--project", "acme", "--json"]);
    expect(JSON.parse(list.stdout)).toEqual([expect.objectContaining({ vendor: "openai", last4: "WXYZ" })]);
    expect(list.stdout).not.toContain(secret.slice(0, -4));
    expect((await dmt(["vendor-keys", "delete", "--project", "acme", "--vendor", "openai"])).code).toBe(0);
    const again = await dmt(["vendor-keys", "delete", "--project", "acme", "--vendor", "openai"]);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain("has no openai key");
  });

  it("refuses a key with whitespace without echoing it, and an unknown vendor", async () => {
    const spaced = await dmt([
      "vendor-keys",
      "set",
      "--project",
      "acme",
      "--vendor",
      "groq",
      "--key",
      "gsk_abc def_ghijklmnopqrst",
    ]);
    expect(spaced.code).toBe(1);
    expect(spaced.stderr).toContain("whitespace");
    expect(spaced.stderr).not.toContain("ghijklmnopqrst");
    const vendor = await dmt([
      "vendor-keys",
      "set",
      "--project",
      "acme",
      "--vendor",
      "mistral",
      "--key",
      secret,
    ]);
    expect(vendor.code).toBe(1);
    expect(vendor.stderr).toContain("vendor");
  });
});

describe("dmt prices list", () => {
  it("lists the active catalogue, filtered by vendor", async () => {
    const res = await dmt(["prices", "list", "--vendor", "anthropic", "--json"]);
    expect(res.code).toBe(0);
    const out = JSON.parse(res.stdout);
    expect(out.markup).toBe(1);
    expect(out.rows.length).toBeGreaterThan(0);
    expect(new Set(out.rows.map((r: { vendor: string }) => r.vendor))).toEqual(new Set(["anthropic"]));
  });

  it("applies a markup from the environment and refuses an unknown vendor", async () => {
    const marked = await runDmt(["prices", "list", "--json"], dataDir, { env: { DMT_PRICE_MARKUP: "1.1" } });
    expect(JSON.parse(marked.stdout).markup).toBe(1.1);
    const bad = await dmt(["prices", "list", "--vendor", "mistral"]);
    expect(bad.code).toBe(2);
  });
});

describe("dmt prices import", () => {
  const fixture = join(import.meta.dirname, "../fixtures/litellm-prices.json");

  it("shows the diff against the catalogue, and writes nothing without --apply", async () => {
    const res = await dmt(["prices", "import", fixture]);
    expect(res.code).toBe(0);
    expect(res.stdout).toContain("+ openai/gpt-7-preview (chat)");
    expect(res.stdout).toContain("~ openai/gpt-5 output: 10 -> 12");
    expect(res.stdout).toContain("? gemini/gemini-2.5-flash audio_input: 1");
    expect(res.stdout).toContain("Nothing written");
  });

  it("--apply writes the override, which the service then charges with", async () => {
    const out = join(dataDir, "override.json");
    const res = await dmt(["prices", "import", fixture, "--apply", "--out", out, "--json"]);
    expect(res.code).toBe(0);
    expect(JSON.parse(res.stdout).written).toBe(out);
    const listed = await runDmt(["prices", "list", "--vendor", "openai", "--json"], dataDir, {
      env: { DMT_PRICES_OVERRIDE: out },
    });
    const rows = JSON.parse(listed.stdout).rows as { model: string }[];
    expect(rows.map((r) => r.model)).toContain("gpt-7-preview");
    expect(JSON.parse(readFileSync(out, "utf8")).models.length).toBeGreaterThan(0);
  });

  it("refuses a file in another format with one line naming the entry and field", async () => {
    const bad = join(dataDir, "not-litellm.json");
    writeFileSync(
      bad,
      JSON.stringify({ "gpt-x": { litellm_provider: "openai", input_cost_per_token: "1" } }),
    );
    const res = await dmt(["prices", "import", bad]);
    expect(res.code).toBe(1);
    expect(res.stderr.trim().split("\n")).toHaveLength(1);
    expect(res.stderr).toContain("gpt-x: input_cost_per_token: must be a number");
    expect((await dmt(["prices", "import", fixture, "--apply"])).code).toBe(2);
  });
});

describe("dmt settings set", () => {
  it("sets and clears the export destination, refusing what is not a bucket URL", async () => {
    const set = await dmt([
      "settings",
      "set",
      "--project",
      "acme",
      "--export-bucket",
      "s3://acme-exports/dmt",
      "--json",
    ]);
    expect(set.code).toBe(0);
    expect(JSON.parse(set.stdout)).toEqual({ projectId: "acme", exportBucket: "s3://acme-exports/dmt" });
    const gcs = await dmt(["settings", "set", "--project", "acme", "--export-bucket", "gs://acme-exports"]);
    expect(gcs.code).toBe(1);
    expect(gcs.stderr).toContain("s3://bucket/prefix");
    const both = await dmt(["settings", "set", "--project", "acme"]);
    expect(both.code).toBe(2);
    const cleared = await dmt(["settings", "set", "--project", "acme", "--no-export-bucket"]);
    expect(cleared.stdout).toContain("streamed back");
  });
});
