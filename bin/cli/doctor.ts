import { parseKey } from "../../lambda/core/keys";
import { type DoctorReport, printReport, runDoctor } from "../doctor/checks";
import { type Command, command } from "./command";
import { readValues, text, UsageError, type Values, wholeNumber } from "./options";

const OPTIONS = {
  url: text(
    "<base url>",
    "the deployment's address: the stack's ApiUrl output (read from the stack with --stack), or http://127.0.0.1:8787",
  ),
  key: text("<dmt key>", "a key of the deployment; better in DMT_KEY, out of the shell's history"),
  model: text(
    "<model>",
    "the Gemini model of the ':'-path and streamed calls (default gemini-2.5-flash-lite)",
  ),
  timeout: wholeNumber("<seconds>", "how long each request may take (default 30)"),
  "record-wait": wholeNumber(
    "<seconds>",
    "how long the streamed call's record may take to appear (default 120)",
  ),
};

const spec = {
  name: "doctor",
  summary: "checks a running deployment from outside, as a new operator would after cdk deploy",
  details: [
    "Checks, one line each: health, root, status (the key), refused (an unknown key's 401 and error",
    "shape), forged-auth (a caller's x-dmt-auth-* headers are not trusted), gemini-path (a ':' path",
    "reaches the proxy), stream (time to first byte), record (the streamed call's record appears),",
    "client-leaves (a client leaving mid-stream is noticed), export (a small export parses),",
    "security-headers (on every answer). A failure says what to do; SKIP marks a check that could",
    "prove nothing (it does not fail the run).",
    "Exit status 0 when every check passes, 1 when one fails. The key is never printed, only its",
    "public prefix. Four calls ask the model for an answer (~650 output tokens in all).",
  ].join("\n"),
  options: OPTIONS,
  examples: [
    "dmt doctor --url https://abc123.execute-api.us-east-1.amazonaws.com/prod/   # the key in DMT_KEY",
    "dmt doctor --url http://127.0.0.1:8787 --json",
    "dmt doctor --stack Dmt   # the stack's ApiUrl output; the key in DMT_KEY",
  ],
  run: async ({ values, stackName }: { values: Values<typeof OPTIONS>; stackName: string | undefined }) => {
    const key = keyOf(values.key);
    return runDoctor({
      url: urlOf(values.url ?? (await apiUrlOf(stackName))),
      key,
      model: values.model ?? "gemini-2.5-flash-lite",
      timeoutMs: (values.timeout || 30) * 1000,
      recordWaitMs: (values["record-wait"] ?? 120) * 1000,
    });
  },
  print: printReport,
};

/** The key from --key or DMT_KEY; a usage error that never repeats what was given. */
function keyOf(given: string | undefined): string {
  const key = given ?? process.env.DMT_KEY;
  if (!key) throw new UsageError("a key is required: --key <dmt key>, or DMT_KEY in the environment");
  const parsed = parseKey(key);
  if (!parsed) throw new UsageError("the key is not a dmt key (dmt_<16 characters>_<43 characters>)");
  return key;
}

/** Without --url, the stack's ApiUrl output (--stack or DMT_STACK). */
async function apiUrlOf(stackName: string | undefined): Promise<string> {
  if (stackName === undefined)
    throw new UsageError("--url <base url> is required, or --stack <name> to use its ApiUrl");
  return (await import("../doctor/stack-url")).stackApiUrl(stackName);
}

function urlOf(given: string): string {
  let url: URL | undefined;
  try {
    url = new URL(given);
  } catch {
    url = undefined;
  }
  if (!url || (url.protocol !== "http:" && url.protocol !== "https:")) {
    throw new UsageError("--url must be an http:// or https:// address");
  }
  return url.href;
}

const base = command(spec);

/**
 * `dmt doctor`: the report goes to stdout either way; when a check failed, one line on stderr and exit
 * status 1, as for any failed command.
 */
export const doctorCommands: Command[] = [
  {
    ...base,
    async execute(raw, _positionals, { stackName }, json) {
      const report: DoctorReport = await spec.run({ values: readValues(OPTIONS, raw), stackName });
      const out = json ? JSON.stringify(report, null, 2) : printReport(report);
      if (report.failed === 0) return out;
      process.stdout.write(`${out}\n`);
      throw new Error(`doctor: ${report.failed} of ${report.checks.length} checks failed`);
    },
  },
];
