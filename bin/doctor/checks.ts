import { displayPrefix, parseKey } from "../../lambda/core/keys";
import {
  type Answer,
  type Client,
  describe,
  isObject,
  jsonOf,
  NoAnswer,
  send,
  sendAndLeave,
  serviceError,
} from "./http";

/**
 * `dmt doctor`'s checks: a running deployment seen from outside, as a new operator sees it after
 * `cdk deploy` (or `dmt serve`). Each check says what it found and, when it fails, what to do. Checks
 * run one after another (a later one reads what an earlier one learnt: the key's project, the streamed
 * call's transaction id) and a check that gets no answer fails on its own; the others still run.
 */

export interface CheckResult {
  name: string;
  ok: boolean;
  /** What the check saw. */
  found: string;
  /** What to do about a failure. */
  fix?: string;
  /** It passed without proving anything: what it saw is in `found`. */
  inconclusive?: true;
}

export interface DoctorReport {
  url: string;
  /** The key's public prefix (`dmt_<key id>`), never the key. */
  key: string;
  passed: number;
  failed: number;
  checks: CheckResult[];
}

export interface DoctorInput {
  url: string;
  key: string;
  /** The Gemini model the `:`-path and streamed calls use. */
  model: string;
  timeoutMs: number;
  /** How long the streamed call's record may take to appear. */
  recordWaitMs: number;
}

/** The spec's response security headers, which every answer must carry. */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  "strict-transport-security": "max-age=31536000",
  "content-security-policy": "default-src 'self'",
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY",
};

/** A well-formed key that no deployment has: the refused call's key. */
const UNKNOWN_KEY = `dmt_${"0".repeat(16)}_${"0".repeat(43)}`;

/** What a caller could forge: the headers the authorizer's context travels in to the proxy functions. */
const FORGED_AUTH_HEADERS: Readonly<Record<string, string>> = {
  "x-dmt-auth-project-id": "doctor-forged-project",
  "x-dmt-auth-key-id": "0000000000000000",
  "x-dmt-auth-tier": "enterprise",
  "x-dmt-auth-rpm": "100000",
  "x-dmt-auth-burst": "100000",
};

/** A user id no caller sends: the export's filter, so its answer stays small on a busy project. */
const EXPORT_USER = "dmt-doctor-no-such-user";

const UNREACHABLE_FIX =
  "check --url: the stack's ApiUrl output after `cdk deploy`, or the local server's address (`dmt serve` prints it)";

class CheckFailed extends Error {
  constructor(
    readonly found: string,
    readonly fix: string,
  ) {
    super(found);
  }
}

const fail = (found: string, fix: string) => new CheckFailed(found, fix);

/** What a check found when it passed, or, when it could prove nothing either way, why not. */
type Outcome = string | { inconclusive: string };

/** What the checks learn as they go, and every answer they saw (for the security headers). */
interface Run {
  input: DoctorInput;
  client: Client;
  answers: { label: string; answer: Answer }[];
  project?: string;
  transactionId?: string;
}

/** Sends a request and keeps its answer for the security-headers check. */
async function call(
  run: Run,
  label: string,
  path: string,
  init: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<Answer> {
  const answer = await send(run.client, path, init);
  run.answers.push({ label, answer });
  return answer;
}

const bearer = (key: string) => ({ authorization: `Bearer ${key}` });
const json = { "content-type": "application/json" };
const geminiPath = (model: string, method: string) =>
  `gemini/v1beta/models/${encodeURIComponent(model)}:${method}`;
/** A prompt for Gemini, its answer held to a few tokens unless a longer one is the point. */
const geminiBody = (prompt: string, maxOutputTokens = 16) =>
  JSON.stringify({
    contents: [{ role: "user", parts: [{ text: prompt }] }],
    generationConfig: { maxOutputTokens },
  });

/** What to do when the key itself was refused, from the service's error. */
function keyFix(answer: Answer): string {
  const error = serviceError(answer);
  if (answer.status === 401 && /revoked|expired/i.test(error?.message ?? "")) {
    return "the key is revoked or expired: create another (`dmt keys create --project <id> --name <name>`, with `--stack <name>` for AWS) and pass it in DMT_KEY";
  }
  if (answer.status === 401) {
    return "this deployment does not know the key: use a key created on it (`dmt --stack <name> keys create ...` for AWS)";
  }
  if (answer.status === 402) return "the project has no credits: `dmt credits grant --project <id> --usd 1`";
  if (answer.status === 403) {
    return "the key may not call this endpoint or model: use a key without --allow/--models limits, or pass --model";
  }
  if (answer.status === 429) return "the key is over its rate or budget limit: wait, or use another key";
  return "";
}

async function health(run: Run): Promise<string> {
  const answer = await call(run, "GET /healthz", "healthz");
  const body = jsonOf(answer);
  if (answer.status === 200 && isObject(body) && body.status === "ok")
    return 'GET /healthz: 200 {"status":"ok"}';
  throw fail(
    `GET /healthz: ${describe(answer)}, not 200 {"status":"ok"}`,
    answer.status === 500
      ? "in AWS a 500 here is the MOCK route on the binary API (it needs CONVERT_TO_TEXT, lib/api.ts): deploy the current version"
      : `this is not a dmt deployment's root: ${UNREACHABLE_FIX}`,
  );
}

async function root(run: Run): Promise<string> {
  const answer = await call(run, "GET /", "");
  const location = answer.headers.get("location");
  if ([301, 302, 303, 307, 308].includes(answer.status) && location) {
    return `GET /: ${answer.status} to ${location} (the dashboard)`;
  }
  throw fail(
    `GET /: ${describe(answer)}, not a redirect to the dashboard`,
    `--url must be the API's root, where / sends a browser to the dashboard: ${UNREACHABLE_FIX}`,
  );
}

async function status(run: Run): Promise<string> {
  const answer = await call(run, "GET /api/v1/status", "api/v1/status", { headers: bearer(run.input.key) });
  const body = jsonOf(answer);
  if (answer.status === 200 && isObject(body) && body.status === "ok" && typeof body.project === "string") {
    run.project = body.project;
    return `GET /api/v1/status: 200, the key is active in project ${body.project}`;
  }
  throw fail(
    `GET /api/v1/status: ${describe(answer)}`,
    keyFix(answer) || `not dmt's status answer: ${UNREACHABLE_FIX}`,
  );
}

async function refused(run: Run): Promise<string> {
  const answer = await call(run, "a refused GET /api/v1/status", "api/v1/status", {
    headers: bearer(UNKNOWN_KEY),
  });
  const error = serviceError(answer);
  if (answer.status === 401 && error?.type === "authentication_error" && error.code === "invalid_api_key") {
    return `an unknown key: ${describe(answer)}`;
  }
  throw fail(
    `an unknown key got ${describe(answer)}, not 401 {"error":{"message","type":"authentication_error","code":"invalid_api_key"}}`,
    "a refusal must be a 401 in the service's error shape: in AWS the authorizer's ACCESS_DENIED gateway response renders it (lib/api.ts); deploy the current version",
  );
}

async function forgedAuth(run: Run): Promise<string> {
  const path = geminiPath(run.input.model, "generateContent");
  const anonymous = await call(run, "a forged POST without a key", path, {
    method: "POST",
    headers: { ...json, ...FORGED_AUTH_HEADERS },
    body: geminiBody("Say OK."),
  });
  if (anonymous.status !== 401 || !serviceError(anonymous)) {
    throw fail(
      `no key but forged x-dmt-auth-* headers got ${describe(anonymous)}, not 401`,
      "the API trusted a caller's x-dmt-auth-* headers: the authorizer's context must replace them (lib/api.ts request parameters). Do not serve traffic until this passes",
    );
  }
  const withKey = await call(run, "a forged POST with the key", path, {
    method: "POST",
    headers: { ...json, ...bearer(run.input.key), ...FORGED_AUTH_HEADERS },
    body: geminiBody("Say OK."),
  });
  if (withKey.status !== 200) {
    throw fail(
      `without a key: 401 as it should; with the key and forged x-dmt-auth-* headers: ${describe(withKey)}`,
      keyFix(withKey) ||
        "a forged header must not change the answer: if the gemini-path check passes, the authorizer appended its value to the caller's header instead of replacing it (lib/api.ts)",
    );
  }
  return "forged x-dmt-auth-* headers: without a key still 401, with the key the call answers 200 as without them";
}

async function geminiColonPath(run: Run): Promise<string> {
  const path = geminiPath(run.input.model, "generateContent");
  const answer = await call(run, "POST ...:generateContent", path, {
    method: "POST",
    headers: { ...json, ...bearer(run.input.key) },
    body: geminiBody("Say OK."),
  });
  const body = jsonOf(answer);
  if (answer.status === 200 && isObject(body) && Array.isArray(body.candidates)) {
    const simulated = answer.headers.get("x-dmt-simulated") === "true" ? " (the local simulator)" : "";
    return `POST /${path}: 200 with ${body.candidates.length} candidate(s)${simulated}`;
  }
  const vendor = serviceError(answer)?.type === "vendor_error" || answer.status >= 500;
  throw fail(
    `POST /${path}: ${describe(answer)}`,
    keyFix(answer) ||
      (answer.status === 404
        ? "the ':' path did not reach the proxy as sent: check that the API passes the path unencoded to the Gemini function"
        : vendor
          ? "the vendor refused or failed: fill the Gemini vendor key secret (README, Deploy), or pass --model a model your Gemini key may call"
          : `not dmt's Gemini route: ${UNREACHABLE_FIX}`),
  );
}

async function stream(run: Run): Promise<string> {
  const path = `${geminiPath(run.input.model, "streamGenerateContent")}?alt=sse`;
  // It carries forged identity headers too: its record must still land in the key's own project.
  const answer = await call(run, "a streamed POST", path, {
    method: "POST",
    headers: { ...json, ...bearer(run.input.key), ...FORGED_AUTH_HEADERS },
    body: geminiBody("Count from one to ten in words."),
  });
  const type = answer.headers.get("content-type") ?? "";
  const events = answer.body.split("\n").filter((line) => line.startsWith("data:")).length;
  const id = answer.headers.get("x-dmt-transaction-id");
  if (answer.status === 200 && type.startsWith("text/event-stream") && events > 0 && id) {
    run.transactionId = id;
    return `first byte after ${Math.round(answer.firstByteMs)} ms, ${events} event(s), transaction ${id}`;
  }
  throw fail(
    `POST /${path}: ${describe(answer)}${id ? "" : ", no x-dmt-transaction-id header"}`,
    keyFix(answer) ||
      "a streamed call must answer text/event-stream with an x-dmt-transaction-id header: check the gemini-path check first, then the proxy function's logs",
  );
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A call's summary from the data API, once it appears (within --record-wait), or a failure. */
async function waitForRecord(
  run: Run,
  id: string,
): Promise<{ summary: Record<string, unknown>; waitedS: string }> {
  const started = performance.now();
  let pause = 250;
  for (;;) {
    const answer = await send(run.client, `api/v1/transactions/${encodeURIComponent(id)}`, {
      headers: bearer(run.input.key),
    });
    const body = jsonOf(answer);
    const waitedS = ((performance.now() - started) / 1000).toFixed(1);
    if (answer.status === 200 && isObject(body) && body.transaction_id === id)
      return { summary: body, waitedS };
    if (answer.status !== 404) {
      throw fail(`GET /api/v1/transactions/${id}: ${describe(answer)}`, keyFix(answer) || UNREACHABLE_FIX);
    }
    if (performance.now() - started + pause > run.input.recordWaitMs) {
      throw fail(
        `the record of ${id} did not appear in the key's project within ${waitedS} s`,
        "records reach the index through the queue and its consumer (up to a minute in AWS): look at the consumer function's errors and the dead-letter queue, or raise --record-wait",
      );
    }
    await sleep(pause);
    pause = Math.min(pause * 2, 5000);
  }
}

async function record(run: Run): Promise<string> {
  const id = run.transactionId;
  if (!id) throw fail("no streamed call to look up", "make the stream check pass first");
  const { summary, waitedS } = await waitForRecord(run, id);
  if (summary.streamed !== true) {
    throw fail(
      `the record of ${id} says it was not streamed`,
      "the proxy's record of a stream is wrong: a bug",
    );
  }
  return `the record of ${id} appeared after ${waitedS} s in the key's project (status ${String(summary.status)}, streamed)`;
}

/** The record's error code, when it has one. */
const errorCodeOf = (summary: Record<string, unknown>) =>
  isObject(summary.error) && typeof summary.error.code === "string" ? summary.error.code : undefined;

async function clientLeaves(run: Run): Promise<Outcome> {
  const path = `${geminiPath(run.input.model, "streamGenerateContent")}?alt=sse`;
  const answer = await sendAndLeave(run.client, path, {
    method: "POST",
    headers: { ...json, ...bearer(run.input.key) },
    body: geminiBody(
      "Count slowly from one to two hundred in words, one number on each line, and say nothing else.",
    ),
  });
  const id = answer.headers.get("x-dmt-transaction-id");
  if (answer.leftAfterMs === undefined || !id) {
    throw fail(
      `POST /${path}: ${describe(answer)}${id ? "" : ", no x-dmt-transaction-id header"}`,
      keyFix(answer) || "a streamed call must answer text/event-stream: make the stream check pass first",
    );
  }
  const left = Math.round(answer.leftAfterMs);
  const { summary } = await waitForRecord(run, id);
  const latency = typeof summary.latency_ms === "number" ? summary.latency_ms : undefined;
  if (errorCodeOf(summary) === "client_closed_request") {
    return `left after ${left} ms; the proxy heard of it and recorded client_closed_request, ending at ${latency ?? "?"} ms`;
  }
  // The record counts from the call's arrival, which is after we sent it: ending before we left, the
  // answer was whole by then, and there was nothing to stop.
  if (summary.status === "success" && latency !== undefined && latency <= left) {
    return {
      inconclusive: `the whole answer (${latency} ms) came before the client left (${left} ms): nothing to stop; a slower vendor answer shows it`,
    };
  }
  throw fail(
    `left after ${left} ms, yet the record says ${String(summary.status)} (${errorCodeOf(summary) ?? "no error"}) after ${latency ?? "?"} ms: the proxy went on streaming to nobody`,
    "the proxy function did not hear that the client left (it is billed for the vendor's whole answer): see docs/aws.md, 'What only a real deploy confirms'",
  );
}

async function exportCheck(run: Run): Promise<string> {
  const today = new Date().toISOString().slice(0, 10);
  const answer = await call(run, "POST /api/v1/exports", "api/v1/exports", {
    method: "POST",
    headers: { ...json, ...bearer(run.input.key) },
    body: JSON.stringify({
      format: "json",
      range: { start: today, end: today },
      filters: { user_id: EXPORT_USER },
    }),
  });
  const body = jsonOf(answer);
  if (answer.status === 200 && Array.isArray(body)) {
    return `POST /api/v1/exports (today, one user id filter): 200, a JSON array of ${body.length} row(s)`;
  }
  if (answer.status === 200 && isObject(body) && typeof body.export_url === "string") {
    return `POST /api/v1/exports (today, one user id filter): 200, written to ${body.export_url}`;
  }
  throw fail(
    `POST /api/v1/exports: ${describe(answer)}, not a JSON export`,
    keyFix(answer) ||
      (answer.status >= 500
        ? "the export's query failed: in AWS look at the data API function's log (the Athena query, its workgroup and bound parameters)"
        : `not dmt's export answer: ${UNREACHABLE_FIX}`),
  );
}

async function securityHeaders(run: Run): Promise<string> {
  if (run.answers.length === 0) throw fail("no answer to look at", UNREACHABLE_FIX);
  const lacking = run.answers.flatMap(({ label, answer }) => {
    const wrong = Object.entries(SECURITY_HEADERS)
      .filter(([name, value]) => answer.headers.get(name) !== value)
      .map(([name]) => name);
    return wrong.length === 0 ? [] : [`${label} (${answer.status}) lacks ${wrong.join(", ")}`];
  });
  if (lacking.length === 0) return `all four on each of the ${run.answers.length} answers`;
  throw fail(
    lacking.join("; "),
    "every answer must carry Strict-Transport-Security, Content-Security-Policy, X-Content-Type-Options and X-Frame-Options as the spec gives them: in AWS the gateway responses and MOCK routes set them (lib/api.ts)",
  );
}

/** The checks in the order they run. */
const CHECKS: [string, (run: Run) => Promise<Outcome>][] = [
  ["health", health],
  ["root", root],
  ["status", status],
  ["refused", refused],
  ["forged-auth", forgedAuth],
  ["gemini-path", geminiColonPath],
  ["stream", stream],
  ["record", record],
  ["client-leaves", clientLeaves],
  ["export", exportCheck],
  ["security-headers", securityHeaders],
];

/** Runs every check against `input.url`; never throws for what the deployment answers. */
export async function runDoctor(input: DoctorInput): Promise<DoctorReport> {
  const parsed = parseKey(input.key);
  const keyPrefix = parsed ? displayPrefix(parsed.keyId) : "(not a dmt key)";
  const base = input.url.endsWith("/") ? input.url : `${input.url}/`;
  // Every request could time out, and each of the two records may take its whole wait: past that, stop.
  const deadline = AbortSignal.timeout(input.timeoutMs * (CHECKS.length + 4) + 2 * input.recordWaitMs);
  const run: Run = { input, client: { base, timeoutMs: input.timeoutMs, deadline }, answers: [] };
  const checks: CheckResult[] = [];
  for (const [name, check] of CHECKS) {
    try {
      const outcome = await check(run);
      checks.push(
        typeof outcome === "string"
          ? { name, ok: true, found: outcome }
          : { name, ok: true, found: outcome.inconclusive, inconclusive: true },
      );
    } catch (err) {
      if (err instanceof CheckFailed) checks.push({ name, ok: false, found: err.found, fix: err.fix });
      else if (err instanceof NoAnswer)
        checks.push({ name, ok: false, found: err.message, fix: UNREACHABLE_FIX });
      else
        checks.push({
          name,
          ok: false,
          found: `unexpected: ${err instanceof Error ? err.message : String(err)}`,
        });
    }
  }
  // Whatever a server sent back (an echo of our headers, say) never shows the key.
  const redact = (text: string) =>
    [input.key, parsed?.secret ?? input.key].reduce((t, secret) => t.split(secret).join(keyPrefix), text);
  const clean = checks.map((c) => ({
    ...c,
    found: redact(c.found),
    ...(c.fix ? { fix: redact(c.fix) } : {}),
  }));
  const passed = clean.filter((c) => c.ok).length;
  return { url: base, key: keyPrefix, passed, failed: clean.length - passed, checks: clean };
}

/** One line per check, what to do under each failure, and a summary. */
export function printReport(report: DoctorReport): string {
  const width = Math.max(...report.checks.map((c) => c.name.length));
  const lines = [`dmt doctor: ${report.url} with key ${report.key}`];
  for (const check of report.checks) {
    const mark = check.inconclusive ? "- SKIP" : check.ok ? "✓ PASS" : "✗ FAIL";
    lines.push(`${mark}  ${check.name.padEnd(width)}  ${check.found}`);
    if (check.fix) lines.push(`${" ".repeat(width + 10)}→ ${check.fix}`);
  }
  const total = report.checks.length;
  const skipped = report.checks.filter((c) => c.inconclusive).map((c) => c.name);
  const unproven = skipped.length > 0 ? ` (inconclusive: ${skipped.join(", ")})` : "";
  lines.push(
    report.failed === 0
      ? `all ${total} checks passed${unproven}`
      : `${report.passed} of ${total} checks passed${unproven}, ${report.failed} failed`,
  );
  return lines.join("\n");
}
