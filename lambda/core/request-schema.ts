/**
 * The data API's request bodies are decided by zod schemas, the same ones `GET /api/v1/openapi.json`
 * describes (app/data-api/openapi.ts), so the description cannot drift from what is accepted. The
 * hand-written checks beside each schema only word the refusal (which field, what it must be); where
 * they would accept what the schema refuses, the schema's own issue is the answer.
 */
import type * as z from "zod/mini";
import { errors } from "./errors";

export function decide<T>(schema: z.ZodMiniType, body: unknown, explain: (body: unknown) => T): T {
  const checked = schema.safeParse(body);
  const explained = explain(body);
  if (checked.success) return explained;
  const issue = checked.error.issues[0];
  throw errors.invalidField(issue?.path.join(".") || "body", issue?.message ?? "is invalid.");
}
