import type { Context } from "hono";
import { errors } from "../core/errors";

/** Limit for the data API's JSON bodies. Proxy routes have their own, per vendor route. */
export const DATA_API_BODY_LIMIT = 1024 * 1024;

/** Reads the body, refusing it with 413 as soon as it passes `limit` bytes (declared or streamed). */
export async function readBody(c: Context, limit: number): Promise<Uint8Array> {
  const declared = c.req.header("content-length");
  if (declared !== undefined && Number(declared) > limit) throw errors.payloadTooLarge(limit);
  const body = c.req.raw.body;
  if (!body) return new Uint8Array();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of body as AsyncIterable<Uint8Array>) {
    size += chunk.byteLength;
    if (size > limit) throw errors.payloadTooLarge(limit);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, size);
}

const decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false });

/**
 * The one parser of JSON request bodies, whatever the Content-Type claims (a wrong or missing type is
 * not an error; a body that is not JSON is: 400 `invalid_json`). A leading UTF-8 byte order mark is
 * tolerated, as RFC 8259 allows. Its errors never quote the body, which may hold a secret.
 */
export function parseJsonBody(bytes: Uint8Array): unknown {
  if (bytes.byteLength === 0) throw errors.invalidJson("the body is empty");
  let text: string;
  try {
    text = decoder.decode(bytes);
  } catch {
    throw errors.invalidJson("the body is not valid UTF-8");
  }
  try {
    return JSON.parse(text);
  } catch {
    // Not the parser's message: it quotes the body, which may hold a secret.
    throw errors.invalidJson();
  }
}

/** `parseJsonBody`, for a body that must be a JSON object (400 otherwise). */
export function parseJsonObjectBody(bytes: Uint8Array): Record<string, unknown> {
  const value = parseJsonBody(bytes);
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw errors.badRequest("invalid_json", "The request body must be a JSON object.");
  }
  return value as Record<string, unknown>;
}

/** The body read (413 past `limit`) and parsed as JSON (`parseJsonBody`). */
export async function readJson(c: Context, limit: number): Promise<unknown> {
  return parseJsonBody(await readBody(c, limit));
}

/** The body read (413 past `limit`) and parsed as a JSON object (`parseJsonObjectBody`). */
export async function readJsonObject(c: Context, limit: number): Promise<Record<string, unknown>> {
  return parseJsonObjectBody(await readBody(c, limit));
}
