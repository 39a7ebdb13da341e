import { once } from "node:events";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * A local OTLP/HTTP receiver, as a collector would be: `POST /v1/traces` and `/v1/metrics` in
 * `application/json` (OTLP/JSON) or `application/x-protobuf`, decoded into one shape whichever the
 * encoding, so a test asserts the same attributes under both. It can be down (refusing connections),
 * slow (holding requests unanswered) or failing (503), to test what the proxy does then.
 *
 * The protobuf decoding is written here from the OTLP protos (opentelemetry-proto, v1: trace.proto,
 * metrics.proto, common.proto, resource.proto): the exporters' transformer package encodes requests
 * and decodes only responses. A test that sends the same calls under both encodings checks the two
 * decodings against each other.
 */

export type Value = string | number | boolean | Value[] | { [key: string]: Value } | null;
export type AttributeMap = Record<string, Value>;

export interface ReceivedSpan {
  name: string;
  kind: number;
  traceId: string;
  spanId: string;
  parentSpanId: string | undefined;
  traceState: string | undefined;
  startTimeUnixNano: bigint;
  endTimeUnixNano: bigint;
  attributes: AttributeMap;
  statusCode: number;
  resource: AttributeMap;
  scope: string;
}

export interface ReceivedPoint {
  attributes: AttributeMap;
  /** A sum's or a gauge's value. */
  value?: number;
  /** A histogram's. */
  count?: number;
  sum?: number;
  bucketCounts?: number[];
  explicitBounds?: number[];
}

export interface ReceivedMetric {
  name: string;
  unit: string;
  description: string;
  type: "sum" | "gauge" | "histogram" | "other";
  points: ReceivedPoint[];
  resource: AttributeMap;
}

export interface ReceivedRequest {
  path: string;
  contentType: string;
  headers: IncomingMessage["headers"];
}

export type ReceiverMode = "up" | "slow" | "failing";

export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  readonly metrics: ReceivedMetric[] = [];
  readonly requests: ReceivedRequest[] = [];
  /** Requests held while slow: taken and answered on `release()` or `close()`. */
  private held: (() => void)[] = [];
  private waiters: (() => void)[] = [];
  mode: ReceiverMode = "up";
  private readonly server = createServer((req, res) => void this.handle(req, res));

  static async start(): Promise<OtlpReceiver> {
    const receiver = new OtlpReceiver();
    receiver.server.listen(0, "127.0.0.1");
    await once(receiver.server, "listening");
    return receiver;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** Resolves once `test` holds over what was received, checked after each request. */
  async until(test: (receiver: this) => boolean): Promise<void> {
    while (!test(this)) await new Promise<void>((resolve) => this.waiters.push(resolve));
  }

  /** The metric points of `name` received so far, latest export last. */
  points(name: string): ReceivedPoint[] {
    return this.metrics.filter((metric) => metric.name === name).flatMap((metric) => metric.points);
  }

  /** Answers the held requests (200) and stops holding new ones. */
  release(): void {
    this.mode = "up";
    for (const accept of this.held.splice(0)) accept();
    this.notify();
  }

  async close(): Promise<void> {
    this.release();
    this.server.closeAllConnections();
    this.server.close();
    await once(this.server, "close").catch(() => undefined);
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = new Uint8Array(Buffer.concat(chunks));
    const contentType = req.headers["content-type"] ?? "";
    const path = req.url ?? "";
    this.requests.push({ path, contentType, headers: req.headers });
    if (this.mode === "failing") {
      res.writeHead(503).end();
      this.notify();
      return;
    }
    const json = contentType.startsWith("application/json");
    if (!json && !contentType.startsWith("application/x-protobuf")) {
      res.writeHead(415).end();
      return;
    }
    if (path !== "/v1/traces" && path !== "/v1/metrics") {
      res.writeHead(404).end();
      return;
    }
    const accept = () => {
      const decoded = json ? JSON.parse(new TextDecoder().decode(body)) : body;
      if (path === "/v1/traces") this.spans.push(...(json ? spansFromJson(decoded) : spansFromProto(body)));
      else this.metrics.push(...(json ? metricsFromJson(decoded) : metricsFromProto(body)));
      // The success answer each encoding expects: an empty Export*ServiceResponse.
      if (json) res.writeHead(200, { "content-type": "application/json" }).end("{}");
      else res.writeHead(200, { "content-type": "application/x-protobuf" }).end();
    };
    if (this.mode === "slow") this.held.push(accept);
    else accept();
    this.notify();
  }

  private notify(): void {
    for (const wake of this.waiters.splice(0)) wake();
  }
}

// ---- OTLP/JSON -------------------------------------------------------------------------------------

type Json = Record<string, unknown>;
const list = (value: unknown): Json[] => (Array.isArray(value) ? (value as Json[]) : []);

function idHex(value: unknown): string | undefined {
  if (typeof value !== "string" || value === "") return undefined;
  // OTLP/JSON says hex; base64 is what a protobuf-JSON mapping would give.
  return /^[0-9a-f]+$/i.test(value) ? value.toLowerCase() : Buffer.from(value, "base64").toString("hex");
}

function jsonValue(value: Json | undefined): Value {
  if (!value) return null;
  if ("stringValue" in value) return value.stringValue as string;
  if ("boolValue" in value) return value.boolValue as boolean;
  if ("intValue" in value) return Number(value.intValue);
  if ("doubleValue" in value) return Number(value.doubleValue);
  if ("arrayValue" in value) return list((value.arrayValue as Json).values).map(jsonValue);
  if ("kvlistValue" in value) return jsonAttributes((value.kvlistValue as Json).values);
  return null;
}

function jsonAttributes(values: unknown): AttributeMap {
  return Object.fromEntries(list(values).map((kv) => [kv.key as string, jsonValue(kv.value as Json)]));
}

function spansFromJson(request: Json): ReceivedSpan[] {
  return list(request.resourceSpans).flatMap((rs) => {
    const resource = jsonAttributes((rs.resource as Json | undefined)?.attributes);
    return list(rs.scopeSpans).flatMap((ss) =>
      list(ss.spans).map((span) => ({
        name: span.name as string,
        kind: Number(span.kind ?? 0),
        traceId: idHex(span.traceId) ?? "",
        spanId: idHex(span.spanId) ?? "",
        parentSpanId: idHex(span.parentSpanId),
        traceState: (span.traceState as string | undefined) || undefined,
        startTimeUnixNano: BigInt(span.startTimeUnixNano as string),
        endTimeUnixNano: BigInt(span.endTimeUnixNano as string),
        attributes: jsonAttributes(span.attributes),
        statusCode: Number((span.status as Json | undefined)?.code ?? 0),
        resource,
        scope: ((ss.scope as Json | undefined)?.name as string) ?? "",
      })),
    );
  });
}

function jsonPoint(point: Json): ReceivedPoint {
  return {
    attributes: jsonAttributes(point.attributes),
    ...("asInt" in point && { value: Number(point.asInt) }),
    ...("asDouble" in point && { value: Number(point.asDouble) }),
    ...("count" in point && { count: Number(point.count) }),
    ...("sum" in point && { sum: Number(point.sum) }),
    ...("bucketCounts" in point && { bucketCounts: (point.bucketCounts as unknown[]).map(Number) }),
    ...("explicitBounds" in point && { explicitBounds: (point.explicitBounds as unknown[]).map(Number) }),
  };
}

function metricsFromJson(request: Json): ReceivedMetric[] {
  return list(request.resourceMetrics).flatMap((rm) => {
    const resource = jsonAttributes((rm.resource as Json | undefined)?.attributes);
    return list(rm.scopeMetrics).flatMap((sm) =>
      list(sm.metrics).map((metric) => {
        const type = (["sum", "gauge", "histogram"] as const).find((t) => t in metric) ?? "other";
        const data = type === "other" ? undefined : (metric[type] as Json);
        return {
          name: metric.name as string,
          unit: (metric.unit as string) ?? "",
          description: (metric.description as string) ?? "",
          type,
          points: list(data?.dataPoints).map(jsonPoint),
          resource,
        };
      }),
    );
  });
}

// ---- OTLP/protobuf ---------------------------------------------------------------------------------

/** One message's fields: number to the values read (varints as bigint, fixed as 8/4 bytes, or bytes). */
type Fields = Map<number, (bigint | Uint8Array)[]>;

function readMessage(buf: Uint8Array): Fields {
  const fields: Fields = new Map();
  let pos = 0;
  const varint = (): bigint => {
    let result = 0n;
    let shift = 0n;
    for (;;) {
      if (pos >= buf.length) throw new Error("truncated varint");
      const byte = buf[pos++] as number;
      result |= BigInt(byte & 0x7f) << shift;
      if ((byte & 0x80) === 0) return result;
      shift += 7n;
    }
  };
  while (pos < buf.length) {
    const tag = Number(varint());
    const field = tag >>> 3;
    const wire = tag & 7;
    let value: bigint | Uint8Array;
    if (wire === 0) value = varint();
    else if (wire === 1) {
      value = buf.subarray(pos, pos + 8);
      pos += 8;
    } else if (wire === 2) {
      const length = Number(varint());
      value = buf.subarray(pos, pos + length);
      pos += length;
    } else if (wire === 5) {
      value = buf.subarray(pos, pos + 4);
      pos += 4;
    } else throw new Error(`wire type ${wire} at ${pos}`);
    if (pos > buf.length) throw new Error("truncated field");
    const values = fields.get(field) ?? [];
    values.push(value);
    fields.set(field, values);
  }
  return fields;
}

const text = new TextDecoder();
const bytesOf = (fields: Fields, n: number) => fields.get(n)?.[0] as Uint8Array | undefined;
const all = (fields: Fields, n: number) => (fields.get(n) ?? []) as Uint8Array[];
const str = (fields: Fields, n: number) => {
  const bytes = bytesOf(fields, n);
  return bytes ? text.decode(bytes) : "";
};
const uint = (fields: Fields, n: number) => Number((fields.get(n)?.[0] as bigint | undefined) ?? 0n);
const fixed64 = (bytes: Uint8Array | undefined) =>
  bytes ? new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true) : 0n;
const double = (bytes: Uint8Array | undefined) =>
  bytes ? new DataView(bytes.buffer, bytes.byteOffset, 8).getFloat64(0, true) : 0;
const hex = (bytes: Uint8Array | undefined) =>
  bytes && bytes.length > 0 ? Buffer.from(bytes).toString("hex") : undefined;

/** Packed repeated 8-byte values (fixed64 counts, double bounds); unpacked ones arrive one per field. */
function packed8<T>(fields: Fields, n: number, read: (bytes: Uint8Array) => T): T[] {
  return all(fields, n).flatMap((bytes) => {
    const out: T[] = [];
    for (let i = 0; i + 8 <= bytes.length; i += 8) out.push(read(bytes.subarray(i, i + 8)));
    return out;
  });
}

function anyValue(buf: Uint8Array | undefined): Value {
  if (!buf) return null;
  const f = readMessage(buf);
  if (f.has(1)) return str(f, 1);
  if (f.has(2)) return uint(f, 2) !== 0;
  if (f.has(3)) return Number(BigInt.asIntN(64, f.get(3)?.[0] as bigint));
  if (f.has(4)) return double(bytesOf(f, 4));
  if (f.has(5)) return all(readMessage(bytesOf(f, 5) as Uint8Array), 1).map(anyValue);
  if (f.has(6)) return attributes(readMessage(bytesOf(f, 6) as Uint8Array), 1);
  return null;
}

function attributes(fields: Fields, n: number): AttributeMap {
  return Object.fromEntries(
    all(fields, n).map((kv) => {
      const f = readMessage(kv);
      return [str(f, 1), anyValue(bytesOf(f, 2))];
    }),
  );
}

function resourceOf(fields: Fields): AttributeMap {
  const resource = bytesOf(fields, 1);
  return resource ? attributes(readMessage(resource), 1) : {};
}

function spansFromProto(body: Uint8Array): ReceivedSpan[] {
  return all(readMessage(body), 1).flatMap((rsBytes) => {
    const rs = readMessage(rsBytes);
    const resource = resourceOf(rs);
    return all(rs, 2).flatMap((ssBytes) => {
      const ss = readMessage(ssBytes);
      const scope = bytesOf(ss, 1);
      return all(ss, 2).map((spanBytes) => {
        const span = readMessage(spanBytes);
        const status = bytesOf(span, 15);
        return {
          name: str(span, 5),
          kind: uint(span, 6),
          traceId: hex(bytesOf(span, 1)) ?? "",
          spanId: hex(bytesOf(span, 2)) ?? "",
          parentSpanId: hex(bytesOf(span, 4)),
          traceState: str(span, 3) || undefined,
          startTimeUnixNano: fixed64(bytesOf(span, 7)),
          endTimeUnixNano: fixed64(bytesOf(span, 8)),
          attributes: attributes(span, 9),
          statusCode: status ? uint(readMessage(status), 3) : 0,
          resource,
          scope: scope ? str(readMessage(scope), 1) : "",
        };
      });
    });
  });
}

function numberPoint(bytes: Uint8Array): ReceivedPoint {
  const p = readMessage(bytes);
  const asInt = bytesOf(p, 6);
  return {
    attributes: attributes(p, 7),
    value: asInt
      ? Number(new DataView(asInt.buffer, asInt.byteOffset, 8).getBigInt64(0, true))
      : double(bytesOf(p, 4)),
  };
}

function histogramPoint(bytes: Uint8Array): ReceivedPoint {
  const p = readMessage(bytes);
  return {
    attributes: attributes(p, 9),
    count: Number(fixed64(bytesOf(p, 4))),
    sum: double(bytesOf(p, 5)),
    bucketCounts: packed8(p, 6, (b) => Number(fixed64(b))),
    explicitBounds: packed8(p, 7, double),
  };
}

function metricsFromProto(body: Uint8Array): ReceivedMetric[] {
  return all(readMessage(body), 1).flatMap((rmBytes) => {
    const rm = readMessage(rmBytes);
    const resource = resourceOf(rm);
    return all(rm, 2).flatMap((smBytes) =>
      all(readMessage(smBytes), 2).map((metricBytes) => {
        const m = readMessage(metricBytes);
        const [type, field, point] = m.has(7)
          ? (["sum", 7, numberPoint] as const)
          : m.has(5)
            ? (["gauge", 5, numberPoint] as const)
            : m.has(9)
              ? (["histogram", 9, histogramPoint] as const)
              : (["other", 0, numberPoint] as const);
        const data = field === 0 ? undefined : bytesOf(m, field);
        return {
          name: str(m, 1),
          description: str(m, 2),
          unit: str(m, 3),
          type,
          points: data ? all(readMessage(data), 1).map(point) : [],
          resource,
        };
      }),
    );
  });
}
