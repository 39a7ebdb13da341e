import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runningStoreEndpoint } from "../../lambda/local/embedded-dynamo";
import { type CliResult, dmtJson, runDmt, startDmtServe } from "../support/cli";
import { startTestHost, type TestHost } from "../support/host";

/** Each step runs several whole CLI processes, each opening a store: generous for a busy machine. */
const CLI_STEP_MS = 180_000;
const KEY_SHAPE = /^dmt_[a-z0-9]{16}_[A-Za-z0-9]{43}$/;

interface CreatedKey {
  id: string;
  key: string;
  name: string;
  project: string;
}

interface ListedKey {
  keyId: string;
  name: string;
  prefix: string;
  status: string;
  revokedAt?: number;
  lastUsedAt?: number;
  allow?: string[];
  rateLimit?: { rpm: number; burst: number };
  expiresAt?: number;
}

const temp = () => mkdtempSync(join(tmpdir(), "dmt-cli-"));

async function statusWith(url: string, key: string) {
  const res = await fetch(`${url}/api/v1/status`, { headers: { Authorization: `Bearer ${key}` } });
  return { status: res.status, body: (await res.json()) as unknown };
}

describe("dmt with no server running", { timeout: CLI_STEP_MS }, () => {
  let dir: string;
  beforeAll(() => {
    dir = temp();
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("creates and lists projects", async () => {
    const created = await dmtJson<{ projectId: string; tier: string; createdAt: number }>(
      ["projects", "create", "demo", "--tier", "pro"],
      dir,
    );
    expect(created).toEqual({ projectId: "demo", tier: "pro", createdAt: expect.any(Number) });
    const listed = await dmtJson<{ projectId: string }[]>(["projects", "list"], dir);
    expect(listed).toEqual([created]);
    const human = await runDmt(["projects", "list"], dir);
    expect(human).toMatchObject({ code: 0, stderr: "" });
    expect(human.stdout).toMatch(/^project\s+tier\s+created\ndemo\s+pro\s+\d{4}-/);
  });

  it("creates, lists and revokes keys; revoking again is harmless", async () => {
    const created = await dmtJson<CreatedKey>(
      ["keys", "create", "--project", "demo", "--name", "laptop"],
      dir,
    );
    expect(Object.keys(created).sort()).toEqual(["id", "key", "name", "project"]);
    expect(created).toMatchObject({ name: "laptop", project: "demo" });
    expect(created.key).toMatch(KEY_SHAPE);
    expect(created.key.startsWith(`dmt_${created.id}_`)).toBe(true);

    const restricted = await dmtJson<CreatedKey>(
      ["keys", "create", "--project", "demo", "--name", "ci", "--allow", "api:/api/v1/status"].concat([
        "--allow",
        "openai:*",
        "--rpm",
        "10",
        "--burst",
        "20",
        "--expires",
        "2099-01-31",
      ]),
      dir,
    );

    const listed = await dmtJson<ListedKey[]>(["keys", "list", "--project", "demo"], dir);
    expect(listed.map((k) => [k.keyId, k.name, k.status])).toEqual([
      [created.id, "laptop", "active"],
      [restricted.id, "ci", "active"],
    ]);
    expect(listed[1]).toMatchObject({
      prefix: `dmt_${restricted.id}`,
      allow: ["api:/api/v1/status", "openai:*"],
      rateLimit: { rpm: 10, burst: 20 },
      expiresAt: Date.parse("2099-01-31"),
    });
    // Listings show no secret and no hash.
    const listing = JSON.stringify(listed);
    expect(listing).not.toContain(created.key);
    expect(listing).not.toContain(created.key.slice(-43));
    expect(listing).not.toContain("secretHash");

    const revoked = await dmtJson<ListedKey>(["keys", "revoke", created.id], dir);
    expect(revoked).toMatchObject({ keyId: created.id, status: "revoked", revokedAt: expect.any(Number) });
    const again = await dmtJson<ListedKey>(["keys", "revoke", created.id], dir);
    expect(again).toEqual(revoked);
    const human = await runDmt(["keys", "revoke", created.id], dir);
    expect(human).toEqual({
      code: 0,
      stdout: `Revoked key ${created.id} ("${created.name}").\n`,
      stderr: "",
    });
    const after = await dmtJson<ListedKey[]>(["keys", "list", "--project", "demo"], dir);
    expect(after.map((k) => k.status)).toEqual(["revoked", "active"]);

    // The CLI opened the store itself and closed it again.
    expect(existsSync(join(dir, "store.json"))).toBe(false);
  });

  it("prints a new key once, with a warning, in human output", async () => {
    const res = await runDmt(["keys", "create", "--project", "demo", "--name", "human"], dir);
    expect(res.code).toBe(0);
    const keys = res.stdout.match(/dmt_[a-z0-9]{16}_[A-Za-z0-9]{43}/g);
    expect(keys).toHaveLength(1);
    expect(res.stdout).toContain("This is the only time the full key is shown.");
  });

  const expectOneLine = (res: CliResult, code: number, message: string | RegExp) => {
    expect(res.code).toBe(code);
    expect(res.stdout).toBe("");
    expect(res.stderr.endsWith("\n")).toBe(true);
    expect(res.stderr.trimEnd().split("\n")).toHaveLength(1);
    if (typeof message === "string") expect(res.stderr).toBe(`${message}\n`);
    else expect(res.stderr).toMatch(message);
    // Each error once: a usage error says "usage:" once, before the problem or before the usage line.
    if (code === 2) expect(res.stderr.match(/usage:/g)).toHaveLength(1);
  };

  // Usage errors are found before the store is opened, so these may run side by side.
  it.concurrent.each<[string, string[], string | RegExp]>([
    ["a missing --project", ["keys", "create", "--name", "x"], "dmt: usage: --project is required"],
    [
      "an unknown option",
      ["keys", "create", "--project", "demo", "--name", "x", "--bogus"],
      /^dmt: unknown option --bogus; usage: dmt keys create --project <id>/,
    ],
    ["an unknown command", ["keys", "frob"], "dmt: usage: unknown command 'keys frob'; run 'dmt --help'"],
    [
      "a missing positional",
      ["projects", "create"],
      "dmt: missing <id>; usage: dmt projects create <id> [--tier free|pro|enterprise] [--json]",
    ],
    [
      "an extra positional",
      ["keys", "revoke", "a", "b"],
      "dmt: unexpected argument 'b'; usage: dmt keys revoke <key> [--project <id>] [--json]",
    ],
    [
      "--rpm without --burst",
      ["keys", "create", "--project", "demo", "--name", "x", "--rpm", "5"],
      "dmt: usage: give --rpm and --burst together",
    ],
    [
      "an unreadable --expires",
      ["keys", "create", "--project", "demo", "--name", "x", "--expires", "tomorrow"],
      "dmt: usage: --expires must be a date like 2027-01-31 or 2027-01-31T12:00:00Z",
    ],
  ])("refuses %s: exit 2, one line on stderr", async (_case, args, message) => {
    expectOneLine(await runDmt(args, dir), 2, message);
  });

  it.each<[string, string[], string | RegExp]>([
    [
      "an unknown project",
      ["keys", "create", "--project", "nope", "--name", "x"],
      "dmt: Project 'nope' does not exist.",
    ],
    ["an unknown key", ["keys", "revoke", "nosuchkey"], "dmt: Key 'nosuchkey' does not exist."],
    ["a duplicate project", ["projects", "create", "demo"], "dmt: Project 'demo' already exists."],
    [
      "an unknown tier",
      ["projects", "create", "other", "--tier", "gold"],
      "dmt: Invalid field 'tier': must be one of free, pro, enterprise",
    ],
    [
      "an expiry in the past",
      ["keys", "create", "--project", "demo", "--name", "x", "--expires", "2001-01-01"],
      "dmt: Invalid field 'expires': must be in the future",
    ],
  ])("refuses %s: exit 1, one line on stderr", async (_case, args, message) => {
    expectOneLine(await runDmt(args, dir), 1, message);
  });
});

describe("dmt while a server runs on the same data dir", { timeout: CLI_STEP_MS }, () => {
  let stack: TestHost;
  beforeAll(async () => {
    stack = await startTestHost({ DMT_KEY_CACHE_MS: "200" });
  });
  afterAll(() => stack.stop());

  it("uses the server's store: a key made by the CLI works against the server at once", async () => {
    const endpoint = runningStoreEndpoint(stack.dataDir);
    await dmtJson(["projects", "create", "live"], stack.dataDir);
    const created = await dmtJson<CreatedKey>(
      ["keys", "create", "--project", "live", "--name", "x"],
      stack.dataDir,
    );
    expect(await statusWith(stack.url, created.key)).toEqual({
      status: 200,
      body: { status: "ok", project: "live" },
    });
    expect((await stack.store.getKey(created.id))?.name).toBe("x");
    const listed = await dmtJson<ListedKey[]>(["keys", "list", "--project", "live"], stack.dataDir);
    expect(listed.map((k) => k.keyId)).toEqual([created.id]);

    await dmtJson(["keys", "revoke", created.id], stack.dataDir);
    let last = await statusWith(stack.url, created.key);
    while (last.status === 200) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      last = await statusWith(stack.url, created.key);
    }
    expect(last.status).toBe(401);

    // The CLI left the server's store alone.
    expect(runningStoreEndpoint(stack.dataDir)).toBe(endpoint);
    expect((await stack.store.getProject("live"))?.tier).toBe("free");
  });
});

describe("dmt serve", { timeout: CLI_STEP_MS }, () => {
  it("serves, shares its store with the CLI, and stops cleanly on SIGINT keeping every write", async () => {
    const dir = temp();
    try {
      const server = await startDmtServe(dir);
      expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(server.output()).toContain("node bin/dmt.mjs projects create demo");
      await dmtJson(["projects", "create", "served"], dir);
      const created = await dmtJson<CreatedKey>(
        ["keys", "create", "--project", "served", "--name", "x"],
        dir,
      );
      expect(await statusWith(server.url, created.key)).toEqual({
        status: 200,
        body: { status: "ok", project: "served" },
      });

      expect(await server.stop("SIGINT")).toBe(0);
      expect(server.output()).toContain("Stopped.");
      // The access log is on by default: a line for the call, without its key.
      expect(server.output()).toMatch(/^GET \/api\/v1\/status 200 \d+ms( \S+)?$/m);
      expect(server.output()).not.toContain(created.key.slice(created.key.lastIndexOf("_") + 1));
      expect(existsSync(join(dir, "store.json"))).toBe(false);

      const listed = await dmtJson<ListedKey[]>(["keys", "list", "--project", "served"], dir);
      expect(listed).toHaveLength(1);
      expect(listed[0]?.lastUsedAt).toEqual(expect.any(Number));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("runs from the CLI's bundle: its warehouse worker records a metered call, and the dashboard is served", async () => {
    const dir = temp();
    try {
      // The bundle `npm install` builds, run directly: bin/dmt.mjs would fall back to the sources were it stale.
      const server = await startDmtServe(dir, [], join(import.meta.dirname, "../../dist/cli/dmt.js"));
      await dmtJson(["projects", "create", "bundled"], dir);
      const { key } = await dmtJson<CreatedKey>(
        ["keys", "create", "--project", "bundled", "--name", "x"],
        dir,
      );
      await dmtJson(["credits", "grant", "--project", "bundled", "--usd", "1"], dir);
      const chat = await fetch(`${server.url}/openai/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }] }),
      });
      expect(chat.status).toBe(200);
      expect(chat.headers.get("x-dmt-cost-usd")).toMatch(/^0\.\d+$/);
      await chat.arrayBuffer();

      const page = await fetch(`${server.url}/dashboard/`);
      expect(page.status).toBe(200);
      expect(await page.text()).toContain("<title>dmt dashboard</title>");
      const script = await fetch(`${server.url}/dashboard/assets/app.js`);
      expect(script.status).toBe(200);
      expect(script.headers.get("content-type")).toContain("javascript");
      expect((await script.text()).length).toBeGreaterThan(10_000);

      expect(await server.stop("SIGINT")).toBe(0);
      const partitions = join(dir, "warehouse/interactions/project=bundled");
      const files = readdirSync(partitions, { recursive: true }).map(String);
      expect(files.filter((file) => file.endsWith(".parquet"))).toHaveLength(1);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
