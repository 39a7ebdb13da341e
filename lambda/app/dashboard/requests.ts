import { createHash } from "node:crypto";
import type { Context } from "hono";
import type { z } from "zod";
import { ApiError, errors } from "../../core/errors";
import type { RequestLog } from "../../core/members";

/** What the dashboard API's routes share: body parsing, the caller's project, operators, idempotency. */

/** A JSON body checked against a schema; the first problem becomes a 400 naming its field. */
export function parseBody<S extends z.ZodType>(schema: S, body: Record<string, unknown>): z.infer<S> {
  const parsed = schema.safeParse(body);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  if (issue?.code === "unrecognized_keys")
    throw errors.invalidField(issue.keys[0] ?? "", "is not a known field");
  const field = issue?.path.join(".") ?? "";
  if (issue?.code === "invalid_type" && body[String(issue.path[0])] === undefined)
    throw errors.missingField(field);
  throw errors.invalidField(field, issue?.message ?? "is invalid");
}

/** The project the membership middleware admitted the caller to. */
export function projectOf(c: Context): string {
  return c.get("membership").projectId;
}

export function requireOperator(c: Context, action: string): void {
  if (!c.get("dashboardUser").operator) {
    throw new ApiError(403, "permission_error", "insufficient_permissions", `Only operators can ${action}.`);
  }
}

const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;
const sha256 = (value: string) => createHash("sha256").update(value, "utf8").digest("hex");

export interface OnceOptions {
  requests: RequestLog;
  /** The operation and what it acts on: one Idempotency-Key means one thing per user and scope. */
  scope: string[];
  /** The meaning of the request: the same key with another meaning is refused. */
  input: unknown;
  now: number;
  /** Does the work; returns the id of what it made (never a secret) and the response. */
  run(): Promise<{ resultId: string; response: Response }>;
  /** The answer to a retry of a finished request. */
  replay(resultId: string): Promise<Response>;
}

/**
 * Runs a create once per `Idempotency-Key` (when the client sends one): a retry of a finished request
 * gets `replay`, a retry while the first is running gets 409, the same key with another input gets 409.
 * A request refused with an ApiError made nothing, so its key may be used again.
 */
export async function once(c: Context, options: OnceOptions): Promise<Response> {
  const idempotencyKey = c.req.header("idempotency-key");
  if (idempotencyKey === undefined) return (await options.run()).response;
  if (!IDEMPOTENCY_KEY.test(idempotencyKey)) {
    throw errors.invalidHeader("Idempotency-Key", "use 1 to 255 visible ASCII characters");
  }
  const { requests, now } = options;
  const requestId = sha256(JSON.stringify([c.get("dashboardUser").userId, ...options.scope, idempotencyKey]));
  const fingerprint = sha256(JSON.stringify(options.input));
  const earlier = await requests.begin(
    { requestId, fingerprint, state: "pending", createdAt: now, expiresAt: now + IDEMPOTENCY_TTL_MS },
    now,
  );
  if (earlier) {
    if (earlier.fingerprint !== fingerprint) {
      throw new ApiError(
        409,
        "idempotency_error",
        "idempotency_key_reused",
        "This Idempotency-Key was already used for a different request; send a new one.",
      );
    }
    if (earlier.state !== "done" || earlier.resultId === undefined) {
      throw new ApiError(
        409,
        "idempotency_error",
        "request_in_progress",
        "A request with this Idempotency-Key is still being processed.",
      );
    }
    return options.replay(earlier.resultId);
  }
  let result: { resultId: string; response: Response };
  try {
    result = await options.run();
  } catch (err) {
    if (err instanceof ApiError) await requests.discard(requestId);
    throw err;
  }
  await requests.complete(requestId, result.resultId);
  return result.response;
}
