import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DoctorReport } from "../../bin/doctor/checks";
import { revokeKey } from "../../lambda/core/accounts";
import { type Simulator, startSimulator } from "../../lambda/local/simulator";
import { type CliResult, runDmt } from "../support/cli";
import { simulatorEnv, startTestHost, type TestHost } from "../support/host";

/** A whole CLI process and a dozen calls, on a machine that may be busy: generous. */
const STEP_MS = 180_000;
const CHECK_NAMES = [
  "health",
  "root",
  "status",
  "refused",
  "forged-auth",
  "gemini-path",
  "stream",
  "record",
  "client-leaves",
  "export",
  "security-headers",
];

/** `dmt doctor` with the key in DMT_KEY (as the README advises), never on the command line. */
function doctor(url: string, key: string, ...more: string[]): Promise<CliResult> {
  return runDmt(["doctor", "--url", url, ...more], "/nonexistent-doctor-data-dir", { env: { DMT_KEY: key } });
}

function reportOf(result: CliResult): DoctorReport {
  return JSON.parse(result.stdout) as DoctorReport;
}

/** Nothing a failure looks like from the inside: the doctor speaks in findings, never traces. */
function expectNoTrace(result: CliResult): void {
  expect(result.stdout + result.stderr).not.toMatch(/\n\s+at |Error:|TypeError|node:internal/);
}

/** A port that was open a moment ago and now is not: nothing listens there. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe("dmt doctor", { timeout: STEP_MS }, () => {
  let host: TestHost;
  let simulator: Simulator;
  let key: string;
  let keyId: string;
  let projectId: string;
  let notDmt: Server;
  let notDmtUrl: string;

  beforeAll(async () => {
    // Gemini paced as a real vendor is, so a client that leaves after the first byte leaves mid-answer.
    simulator = await startSimulator({ chunkDelayMs: 100 });
    host = await startTestHost(simulatorEnv({ gemini: simulator.origins.gemini }));
    ({ key, keyId, projectId } = await host.newKey());
    // A server that is not dmt, and one that repeats what it was sent: the key must still not show.
    notDmt = createServer((req, res) => {
      res.writeHead(200, { "content-type": "text/plain" });
      res.end(`hello from something else; you sent ${JSON.stringify(req.headers)}`);
    });
    await new Promise<void>((resolve) => notDmt.listen(0, "127.0.0.1", resolve));
    notDmtUrl = `http://127.0.0.1:${(notDmt.address() as AddressInfo).port}`;
  }, STEP_MS);

  afterAll(async () => {
    await new Promise<void>((resolve) => notDmt?.close(() => resolve()));
    await host?.stop();
    await simulator?.close();
  });

  it("passes every check against the local server, printing one line per check and a summary", async () => {
    const result = await doctor(host.url, key);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    const lines = result.stdout.trimEnd().split("\n");
    expect(lines[0]).toBe(`dmt doctor: ${host.url}/ with key dmt_${keyId}`);
    for (const [i, name] of CHECK_NAMES.entries())
      expect(lines[i + 1]).toMatch(new RegExp(`^✓ PASS  ${name} +\\S`));
    expect(lines.at(-1)).toBe(`all ${CHECK_NAMES.length} checks passed`);
    expect(result.stdout).toContain(`the key is active in project ${projectId}`);
    expect(result.stdout).toMatch(/first byte after \d+ ms/);
    expect(result.stdout).toMatch(
      /left after \d+ ms; the proxy heard of it and recorded client_closed_request/,
    );
    expect(result.stdout).not.toContain(key);
  });

  it("--json gives the same checks, with the key's public prefix only", async () => {
    const result = await doctor(host.url, key, "--json");
    expect(result.code).toBe(0);
    const report = reportOf(result);
    expect(report).toMatchObject({ key: `dmt_${keyId}`, passed: CHECK_NAMES.length, failed: 0 });
    expect(report.checks.map((c) => [c.name, c.ok])).toEqual(CHECK_NAMES.map((n) => [n, true]));
    const stream = report.checks.find((c) => c.name === "stream");
    const id = /transaction (\S+)/.exec(stream?.found ?? "")?.[1];
    // The record the doctor found is the streamed call's, in the key's own project despite the forged headers.
    const summary = await fetch(`${host.url}/api/v1/transactions/${id}`, {
      headers: { authorization: `Bearer ${key}` },
    });
    expect(summary.status).toBe(200);
    expect(await summary.json()).toMatchObject({ transaction_id: id, streamed: true, vendor: "gemini" });
    expect(result.stdout).not.toContain(key);
  });

  it("fails every check with a clear finding against a closed port, exit 1, no trace", async () => {
    const url = `http://127.0.0.1:${await closedPort()}`;
    const result = await doctor(url, key, "--json");
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(`dmt: doctor: ${CHECK_NAMES.length} of ${CHECK_NAMES.length} checks failed\n`);
    const report = reportOf(result);
    expect(report.checks.map((c) => c.name)).toEqual(CHECK_NAMES);
    for (const check of report.checks) {
      expect(check.ok).toBe(false);
      expect(check.fix).toMatch(/\S/);
    }
    expect(report.checks[0]?.found).toContain("nothing is listening at 127.0.0.1");
    expectNoTrace(result);
  });

  it("fails the key's checks with a revoked key and says to create another; the keyless checks still pass", async () => {
    const revoked = await host.newKey({ projectId });
    await revokeKey(host.store, revoked.keyId, Date.now());
    // The key cache (200 ms in tests) must forget the key was valid: it never was used, so nothing to forget.
    const result = await doctor(host.url, revoked.key, "--json");
    expect(result.code).toBe(1);
    const report = reportOf(result);
    const byName = new Map(report.checks.map((c) => [c.name, c]));
    for (const name of ["health", "root", "refused", "security-headers"])
      expect(byName.get(name)?.ok).toBe(true);
    for (const name of [
      "status",
      "forged-auth",
      "gemini-path",
      "stream",
      "record",
      "client-leaves",
      "export",
    ]) {
      expect(byName.get(name)?.ok).toBe(false);
    }
    expect(byName.get("status")?.found).toContain("This API key has been revoked.");
    expect(byName.get("status")?.fix).toContain("dmt keys create");
    expect(result.stdout).not.toContain(revoked.key);
    expectNoTrace(result);
  });

  it("fails every check against a server that is not dmt, and never shows the key it echoed", async () => {
    const human = await doctor(notDmtUrl, key);
    expect(human.code).toBe(1);
    const lines = human.stdout.split("\n").filter((l) => /^[✓✗]/.test(l));
    expect(lines).toHaveLength(CHECK_NAMES.length);
    for (const line of lines) expect(line).toMatch(/^✗ FAIL/);
    expect(human.stdout).toMatch(/→ /);
    expect(human.stdout).toContain(`dmt_${keyId}`);
    expect(human.stdout + human.stderr).not.toContain(key);
    expect(human.stdout + human.stderr).not.toContain(key.slice(-43));
    expectNoTrace(human);
  });

  it("with --stack and no --url, checks the stack's ApiUrl output", async () => {
    // CloudFormation's DescribeStacks, as the SDK reaches it through AWS_ENDPOINT_URL_CLOUDFORMATION.
    const cloudFormation = createServer((req, res) => {
      let body = "";
      req.on("data", (chunk: Buffer) => {
        body += chunk.toString();
      });
      req.on("end", () => {
        const name = new URLSearchParams(body).get("StackName");
        const outputs =
          name === "Dmt"
            ? `<Outputs><member><OutputKey>ApiUrl</OutputKey><OutputValue>${host.url}/</OutputValue></member></Outputs>`
            : "";
        res.writeHead(200, { "content-type": "text/xml" });
        res.end(`<DescribeStacksResponse xmlns="http://cloudformation.amazonaws.com/doc/2010-05-15/">
  <DescribeStacksResult><Stacks><member>
    <StackId>arn:aws:cloudformation:eu-west-1:123456789012:stack/${name}/0f1e2d3c</StackId>
    <StackName>${name}</StackName><CreationTime>2026-11-01T00:00:00Z</CreationTime>
    <StackStatus>UPDATE_COMPLETE</StackStatus>${outputs}
  </member></Stacks></DescribeStacksResult>
  <ResponseMetadata><RequestId>test</RequestId></ResponseMetadata>
</DescribeStacksResponse>`);
      });
    });
    await new Promise<void>((resolve) => cloudFormation.listen(0, "127.0.0.1", resolve));
    const aws = {
      AWS_REGION: "eu-west-1",
      AWS_ACCESS_KEY_ID: "AKIDEXAMPLE",
      AWS_SECRET_ACCESS_KEY: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
      AWS_CONFIG_FILE: "/nonexistent-aws-config",
      AWS_SHARED_CREDENTIALS_FILE: "/nonexistent-aws-credentials",
      AWS_ENDPOINT_URL_CLOUDFORMATION: `http://127.0.0.1:${(cloudFormation.address() as AddressInfo).port}`,
    };
    try {
      const run = (stack: string) =>
        runDmt(["--stack", stack, "doctor", "--json"], "/nonexistent-doctor-data-dir", {
          env: { ...aws, DMT_KEY: key },
        });
      const result = await run("Dmt");
      expect(result.stderr).toBe("");
      expect(result.code).toBe(0);
      expect(reportOf(result)).toMatchObject({ url: `${host.url}/`, failed: 0 });
      const bare = await run("Bare");
      expect(bare.code).toBe(1);
      expect(bare.stderr).toBe(
        "dmt: Stack 'Bare' has no ApiUrl output: deploy the current version of the stack.\n",
      );
    } finally {
      await new Promise<void>((resolve) => cloudFormation.close(() => resolve()));
    }
  });

  it("refuses bad input before any request: no key, a malformed key, no URL, a URL that is not http", async () => {
    const noKey = await runDmt(["doctor", "--url", host.url], "/nonexistent-doctor-data-dir", {
      env: { DMT_KEY: "" },
    });
    expect(noKey.code).toBe(2);
    expect(noKey.stderr).toContain("a key is required");
    const malformed = await doctor(host.url, "sk-not-a-dmt-key-123");
    expect(malformed.code).toBe(2);
    expect(malformed.stderr).not.toContain("sk-not-a-dmt-key-123");
    const noUrl = await runDmt(["doctor"], "/nonexistent-doctor-data-dir", {
      env: { DMT_KEY: key, DMT_STACK: "" },
    });
    expect(noUrl.code).toBe(2);
    expect(noUrl.stderr).toContain("--url <base url> is required, or --stack <name>");
    const ftp = await doctor("ftp://127.0.0.1/", key);
    expect(ftp.code).toBe(2);
    expect(ftp.stderr).toContain("--url must be an http:// or https:// address");
  });
});

/**
 * A stand-in for a deployment whose proxy never hears a client leave: its streams answer and its
 * records say success after `latencyMs`. Only the streamed call and the record are served.
 */
async function streamingStandIn(latencyMs: number): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer((req, res) => {
    if (req.method === "POST" && req.url?.includes(":streamGenerateContent")) {
      res.writeHead(200, { "content-type": "text/event-stream", "x-dmt-transaction-id": "t-stand-in" });
      res.end('data: {"candidates":[]}\n\n');
      return;
    }
    if (req.url === "/api/v1/transactions/t-stand-in") {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          transaction_id: "t-stand-in",
          status: "success",
          latency_ms: latencyMs,
          streamed: true,
        }),
      );
      return;
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe("dmt doctor's client-leaves check", { timeout: STEP_MS }, () => {
  const key = `dmt_${"a".repeat(16)}_${"B".repeat(43)}`;
  const clientLeaves = (report: DoctorReport) => report.checks.find((c) => c.name === "client-leaves");

  it("fails when the record says the answer ran on, whole, long after the client left", async () => {
    const standIn = await streamingStandIn(600_000);
    try {
      const result = await doctor(standIn.url, key, "--json");
      expect(result.code).toBe(1);
      const check = clientLeaves(reportOf(result));
      expect(check).toMatchObject({ ok: false });
      expect(check?.found).toContain("the proxy went on streaming to nobody");
      expect(check?.fix).toContain("did not hear that the client left");
    } finally {
      await standIn.close();
    }
  });

  it("says it proved nothing when the whole answer came before the client left", async () => {
    const standIn = await streamingStandIn(0);
    try {
      const result = await doctor(standIn.url, key);
      expect(result.code).toBe(1); // the stand-in fails the other checks
      expect(result.stdout).toMatch(
        /^- SKIP {2}client-leaves +the whole answer \(0 ms\) came before the client left/m,
      );
      expect(result.stdout).toMatch(/checks passed \(inconclusive: client-leaves\), \d+ failed$/m);
    } finally {
      await standIn.close();
    }
  });
});
