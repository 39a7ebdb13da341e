/**
 * The doctor's HTTP client: every request bounded by its own timeout and by the run's deadline, every
 * failure turned into a sentence (never a stack trace), and the caller's key never in what it reports.
 */

/** What one request got back: the status, headers and body text (bounded), and when its bytes came. */
export interface Answer {
  status: number;
  headers: Headers;
  body: string;
  /** Milliseconds from sending to the first body byte (to the headers when the body was empty). */
  firstByteMs: number;
}

/** A request that got no answer: nothing listening, a name that does not resolve, a timeout. */
export class NoAnswer extends Error {}

export interface Client {
  /** The deployment's base URL, ending in `/`. */
  base: string;
  /** Per request, milliseconds. */
  timeoutMs: number;
  /** The whole run's end: a request never outlives it. */
  deadline: AbortSignal;
}

/** Enough of any answer to judge it; a bigger body is cut (an export of a busy day is not read whole). */
const BODY_LIMIT = 256 * 1024;

/** Sends one request to `path` (relative to the base) and reads its answer, or throws NoAnswer. */
export async function send(
  client: Client,
  path: string,
  init: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<Answer> {
  const url = new URL(path, client.base);
  const signal = AbortSignal.any([AbortSignal.timeout(client.timeoutMs), client.deadline]);
  const started = performance.now();
  try {
    const response = await fetch(url, { ...init, redirect: "manual", signal });
    const { body, firstByteMs } = await readBody(response, started);
    return { status: response.status, headers: response.headers, body, firstByteMs };
  } catch (err) {
    throw new NoAnswer(why(err, url, client.timeoutMs, client.deadline));
  }
}

/** What a client that left after the first byte saw; `leftAfterMs` is undefined when it read the whole answer. */
export interface LeftAnswer extends Answer {
  leftAfterMs?: number;
}

/**
 * Sends a request for a streamed answer and goes away after its first body byte, as a client that
 * closes a tab does. Any other answer (an error, a plain body) is read whole, to be described.
 */
export async function sendAndLeave(
  client: Client,
  path: string,
  init: { method?: string; headers?: Record<string, string>; body?: string },
): Promise<LeftAnswer> {
  const url = new URL(path, client.base);
  const leave = new AbortController();
  const signal = AbortSignal.any([AbortSignal.timeout(client.timeoutMs), client.deadline, leave.signal]);
  const started = performance.now();
  try {
    const response = await fetch(url, { ...init, redirect: "manual", signal });
    const streamed = response.headers.get("content-type")?.startsWith("text/event-stream") === true;
    if (response.status !== 200 || !streamed || !response.body) {
      const { body, firstByteMs } = await readBody(response, started);
      return { status: response.status, headers: response.headers, body, firstByteMs };
    }
    const reader = response.body.getReader();
    const first = await reader.read();
    const leftAfterMs = performance.now() - started;
    leave.abort();
    reader.releaseLock();
    const body = first.value ? new TextDecoder().decode(first.value) : "";
    return { status: 200, headers: response.headers, body, firstByteMs: leftAfterMs, leftAfterMs };
  } catch (err) {
    throw new NoAnswer(why(err, url, client.timeoutMs, client.deadline));
  }
}

async function readBody(response: Response, started: number): Promise<{ body: string; firstByteMs: number }> {
  let firstByteMs = performance.now() - started;
  if (!response.body) return { body: "", firstByteMs };
  const decoder = new TextDecoder();
  let body = "";
  let first = true;
  for await (const chunk of response.body) {
    if (first) {
      firstByteMs = performance.now() - started;
      first = false;
    }
    body += decoder.decode(chunk, { stream: true });
    if (body.length >= BODY_LIMIT) {
      await response.body.cancel().catch(() => {});
      break;
    }
  }
  return { body: body + decoder.decode(), firstByteMs };
}

/** Why a request got no answer, in words an operator can act on. */
function why(err: unknown, url: URL, timeoutMs: number, deadline: AbortSignal): string {
  if (deadline.aborted) return `no answer from ${url.host} before the run's time limit`;
  if (err instanceof Error && (err.name === "TimeoutError" || err.name === "AbortError")) {
    return `no answer from ${url.host} within ${Math.round(timeoutMs / 1000)} s`;
  }
  const cause = err instanceof Error ? err.cause : undefined;
  const code = cause instanceof Error && "code" in cause ? String(cause.code) : undefined;
  switch (code) {
    case "ECONNREFUSED":
      return `nothing is listening at ${url.host} (connection refused)`;
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return `the name ${url.hostname} does not resolve (${code})`;
    case "ECONNRESET":
    case "UND_ERR_SOCKET":
      return `${url.host} closed the connection without an answer`;
    default: {
      const detail =
        cause instanceof Error ? cause.message : err instanceof Error ? err.message : String(err);
      return `no answer from ${url.host}: ${detail}`;
    }
  }
}

/** The body as JSON, or undefined when it is not JSON. */
export function jsonOf(answer: Answer): unknown {
  try {
    return JSON.parse(answer.body);
  } catch {
    return undefined;
  }
}

export const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/** The service's error shape `{"error":{"message","type","code"}}`, or undefined. */
export function serviceError(answer: Answer): { message: string; type: string; code: string } | undefined {
  const body = jsonOf(answer);
  const error = isObject(body) ? body.error : undefined;
  if (!isObject(error)) return undefined;
  const { message, type, code } = error;
  if (typeof message !== "string" || typeof type !== "string" || typeof code !== "string") return undefined;
  return { message, type, code };
}

/** A short, one-line picture of an answer for a finding: status, then the error or the body's start. */
export function describe(answer: Answer): string {
  const error = serviceError(answer);
  if (error) return `${answer.status} ${error.type}/${error.code}: ${error.message}`;
  const text = answer.body.replace(/\s+/g, " ").trim();
  const start = text.length > 120 ? `${text.slice(0, 120)}...` : text;
  return start === "" ? `${answer.status} (empty body)` : `${answer.status} ${start}`;
}
