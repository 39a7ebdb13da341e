import type { Context } from "hono";
import { KEY_QUERY_PARAMS } from "../../core/credentials";
import { errors } from "../../core/errors";
import { mentionsServiceKey } from "../../core/keys";
import type { UsageFormat, VendorDefinition, VendorRoute } from "../../core/vendor-model";
import { formFields, uploadBoundary, withFormField } from "../../vendors/multipart";
import { parseJsonObjectBody, readBody } from "../body";
import type { AppEnv } from "../env";

/** A client request, checked and ready to forward. */
export interface PreparedRequest {
  /** The bytes to send: the client's own, or asking for a stream's usage (the route's `streamUsage`). */
  upstreamBody: Uint8Array | undefined;
  /** The client's bytes, for the record. */
  clientBody: Uint8Array | undefined;
  contentType: string | undefined;
  json: Record<string, unknown> | undefined;
  /** An upload's small text fields (`model`, `n`, `size`...). */
  form: Map<string, string> | undefined;
  /** The model the body names (JSON `model`, an upload's `model` field), else the route's default. */
  model: string | undefined;
  stream: boolean;
  /** Usage was asked for on the client's behalf: what the asking added must not reach the client. */
  stripUsage: boolean;
  /** The answer was asked in another format for its usage: the client's format from it (`usageFormat`). */
  render?: UsageFormat["render"];
}

const KEY_QUERY_NAMES = new Set<string>(KEY_QUERY_PARAMS);

/** Reads and checks the body as the route declares it: JSON parsed (400), uploads with a boundary, limits (413). */
export async function prepareRequest(c: Context<AppEnv>, route: VendorRoute): Promise<PreparedRequest> {
  const contentType = c.req.header("content-type");
  if (route.kind === "none") {
    return {
      upstreamBody: undefined,
      clientBody: undefined,
      contentType,
      json: undefined,
      form: undefined,
      model: undefined,
      stream: false,
      stripUsage: false,
    };
  }
  const boundary = route.kind === "multipart" ? uploadBoundary(contentType) : undefined;
  const body = await readLimited(c, route.bodyLimit);
  if (boundary !== undefined) {
    const form = formFields(boundary, body);
    route.check?.((name) => form.get(name));
    const usageFormat = route.usageFormat?.(form);
    return {
      upstreamBody: usageFormat
        ? withFormField(boundary, body, usageFormat.field, usageFormat.upstreamValue)
        : body,
      clientBody: body,
      contentType,
      json: undefined,
      form,
      model: form.get("model") ?? route.defaultModel?.((name) => form.get(name)),
      stream: false,
      stripUsage: false,
      ...(usageFormat && { render: usageFormat.render }),
    };
  }
  const json = parseJsonObjectBody(body);
  route.check?.((name) => json[name]);
  const stream = route.stream === "always" || (route.stream === "body-flag" && json.stream === true);
  const withUsage = stream ? route.streamUsage?.ask(body, json) : undefined;
  return {
    upstreamBody: withUsage ?? body,
    clientBody: body,
    contentType,
    json,
    form: undefined,
    model:
      typeof json.model === "string"
        ? json.model
        : json.model === undefined
          ? route.defaultModel?.((name) => json[name])
          : undefined,
    stream,
    stripUsage: withUsage !== undefined,
  };
}

/** The body, refused with 413 past `limit`: a declared length is checked before reading anything. */
async function readLimited(c: Context<AppEnv>, limit: number): Promise<Uint8Array> {
  const declared = c.req.header("content-length");
  if (declared === undefined) return readBody(c, limit);
  if (Number(declared) > limit) throw errors.payloadTooLarge(limit);
  return new Uint8Array(await c.req.raw.arrayBuffer());
}

/**
 * The query string to forward: the client's, less the parameters that carry keys (`api_key` and `key`
 * in any case; names and values are compared percent-decoded) and any parameter naming or holding a
 * service key; checked by the vendor's rules. Empty, or starting with `?`.
 */
export function forwardedQuery(url: string, vendor: VendorDefinition): string {
  const mark = url.indexOf("?");
  if (mark === -1 || mark === url.length - 1) return "";
  const query = new URLSearchParams(url.slice(mark + 1));
  const carriesKey = ([name, value]: [string, string]) =>
    KEY_QUERY_NAMES.has(name.toLowerCase()) || mentionsServiceKey(name) || mentionsServiceKey(value);
  for (const [name] of [...query].filter(carriesKey)) query.delete(name);
  vendor.checkQuery?.(query);
  const rest = query.toString();
  return rest === "" ? "" : `?${rest}`;
}
