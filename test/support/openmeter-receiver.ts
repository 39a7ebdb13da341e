import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

/** An event the receiver accepted. */
export interface ReceivedCloudEvent {
  specversion: string;
  id: string;
  source: string;
  type: string;
  time?: string;
  subject?: string;
  datacontenttype?: string;
  data?: Record<string, unknown>;
  [extension: string]: unknown;
}

export interface OpenMeterReceiver {
  /** The base address: events go to `<url>/api/v1/events`. */
  url: string;
  token: string;
  /** Accepted events, deduplicated by `id` and `source` as OpenMeter does. */
  events: ReceivedCloudEvent[];
  /** Every request: content type, status answered, and the problem's detail when refused. */
  requests: { contentType: string; status: number; detail?: string; authorization?: string }[];
  /** Statuses to answer before reading a request, in order (a 503, a 429); once used up, normal. */
  script: number[];
  /** Subjects refused with a 400 (an endpoint's validation: an unknown customer). */
  refusedSubjects: Set<string>;
  close(): Promise<void>;
}

/** RFC 3339, as CloudEvents' `time` must be. */
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

/**
 * The CloudEvents 1.0 spec's rules for one event's context attributes (section "Context Attributes"):
 * `id`, `source`, `specversion` and `type` required non-empty strings, `specversion` "1.0", `source` a
 * URI-reference, `time` RFC 3339 where present, `subject` and `datacontenttype` non-empty where present,
 * attribute names lower-case letters and digits. Answers the first violation, or undefined.
 */
export function cloudEventViolation(value: unknown): string | undefined {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return "an event is not an object";
  const event = value as Record<string, unknown>;
  for (const name of ["id", "source", "specversion", "type"]) {
    if (typeof event[name] !== "string" || event[name] === "")
      return `required attribute '${name}' is missing or empty`;
  }
  if (event.specversion !== "1.0") return `specversion '${String(event.specversion)}' is not 1.0`;
  if (/\s/.test(event.source as string)) return "source is not a URI-reference";
  if (event.time !== undefined && (typeof event.time !== "string" || !RFC3339.test(event.time))) {
    return "time is not an RFC 3339 timestamp";
  }
  for (const name of ["subject", "datacontenttype"]) {
    if (event[name] !== undefined && (typeof event[name] !== "string" || event[name] === "")) {
      return `attribute '${name}' must be a non-empty string`;
    }
  }
  for (const name of Object.keys(event)) {
    if (name !== "data" && !/^[a-z0-9]{1,20}$/.test(name)) return `attribute name '${name}' is not valid`;
  }
  return undefined;
}

/**
 * An OpenMeter-compatible ingest endpoint on 127.0.0.1 (`POST /api/v1/events`): one event as
 * `application/cloudevents+json`, or a list as `application/cloudevents-batch+json`, behind a bearer
 * token; 204 when taken, 400 `application/problem+json` naming the first violation of the CloudEvents
 * spec (nothing of that request is kept), 401 without the token.
 */
export async function startOpenMeterReceiver(): Promise<OpenMeterReceiver> {
  const token = `om_test_${Math.random().toString(36).slice(2)}`;
  const events: ReceivedCloudEvent[] = [];
  const seen = new Set<string>();
  const requests: OpenMeterReceiver["requests"] = [];
  const receiver = { events, requests, script: [] as number[], refusedSubjects: new Set<string>() };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const contentType = (req.headers["content-type"] ?? "").split(";")[0]?.trim() ?? "";
      const reply = (status: number, detail?: string) => {
        requests.push({
          contentType,
          status,
          ...(detail !== undefined ? { detail } : {}),
          ...(req.headers.authorization ? { authorization: req.headers.authorization } : {}),
        });
        if (detail === undefined) res.writeHead(status).end();
        else
          res
            .writeHead(status, { "content-type": "application/problem+json" })
            .end(JSON.stringify({ type: "about:blank", title: "Bad Request", status, detail }));
      };
      const scripted = receiver.script.shift();
      if (scripted !== undefined) return reply(scripted, "scripted");
      if (req.method !== "POST" || req.url !== "/api/v1/events") return reply(404, "not found");
      if (req.headers.authorization !== `Bearer ${token}`) return reply(401, "unauthorized");
      let body: unknown;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      } catch {
        return reply(400, "the body is not JSON");
      }
      let list: unknown[];
      if (contentType === "application/cloudevents+json") list = [body];
      else if (contentType === "application/cloudevents-batch+json") {
        if (!Array.isArray(body)) return reply(400, "a batch is not a JSON array");
        list = body;
      } else return reply(415, `content type '${contentType}' is not a CloudEvents JSON format`);
      for (const event of list) {
        const violation = cloudEventViolation(event);
        if (violation) return reply(400, violation);
        const subject = (event as ReceivedCloudEvent).subject;
        if (subject !== undefined && receiver.refusedSubjects.has(subject)) {
          return reply(400, `subject '${subject}' is not a known customer`);
        }
      }
      for (const event of list as ReceivedCloudEvent[]) {
        const key = `${event.source}\n${event.id}`;
        if (seen.has(key)) continue;
        seen.add(key);
        events.push(event);
      }
      reply(204);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return Object.assign(receiver, {
    url: `http://127.0.0.1:${port}`,
    token,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  });
}
