/**
 * A built-in simulator of the four vendors' wire formats (Groq, OpenAI, Anthropic, Gemini), close
 * enough that the official SDKs accept its answers. The proxy uses it as the upstream in tests,
 * benchmarks and the local service when a vendor has no key. Answers are deterministic and carry
 * `x-dmt-simulated: true`; failures (status, slow first byte, reset mid-stream, hang) are injectable.
 * OpenAI's and Anthropic's organization usage reports answer from the calls served (usage-report.ts).
 */
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { setImmediate as nextLoop, setTimeout as sleep } from "node:timers/promises";
import { anthropic } from "./anthropic";
import { gemini } from "./gemini";
import { openAiFamily } from "./openai";
import { jsonReply, type Reply, type SimRequest, SimState, SimulatedError, type VendorName } from "./reply";
import type { ServedUsage } from "./usage-ledger";
import { defaultMessage, type VendorSim } from "./vendor";

export type { VendorName } from "./reply";
export type { ServedUsage } from "./usage-ledger";

export interface RecordedRequest {
  vendor: VendorName;
  method: string;
  /** The path below the vendor prefix: `/v1/chat/completions` for `${origins.openai}/v1/chat/completions`. */
  path: string;
  /** The raw query string, without `?` ("" when none). */
  query: string;
  /** Lower-case names; repeated headers joined with ", ". */
  headers: Record<string, string>;
  body: Buffer;
}

export type Fault =
  | { kind: "status"; status: number; body?: unknown; headers?: Record<string, string> }
  | { kind: "slowFirstByte"; ms: number }
  | { kind: "resetMidStream"; afterChunks: number }
  | { kind: "hang" };

export interface FaultRule {
  fault: Fault;
  vendor?: VendorName;
  /** Matched against the full request path, prefix included (`/openai/v1/chat/completions`). */
  pathIncludes?: string;
  /** How many matching requests the fault applies to (default 1). */
  times?: number;
}

export interface SimulatorOptions {
  port?: number;
  host?: string;
  /** Pause between two chunks of a streamed answer (default 0). */
  chunkDelayMs?: number;
  /** Keep every request in `requests` (default true; benchmarks turn it off). */
  record?: boolean;
}

export interface Simulator {
  url: string;
  /** The upstream base per vendor, standing for its real origin (DESIGN §2). */
  origins: Record<VendorName, string>;
  requests: RecordedRequest[];
  inject(rule: FaultRule): void;
  setChunkDelay(ms: number): void;
  /**
   * Usage the organization's reports count besides the calls the simulator answered: a call made with
   * the vendor key elsewhere, as drift to find (usage-report.ts).
   */
  reportUsage(vendor: "openai" | "anthropic", usage: ServedUsage): void;
  /** Clears the recorded requests, the pending faults and the remembered caches. */
  reset(): void;
  /** Stops listening and ends every connection, hanging and streaming ones included. */
  close(): Promise<void>;
}

/** The marker every simulated answer carries. */
const SIMULATED = { "x-dmt-simulated": "true" };

/** The simulated vendors, by the first segment of the path. */
const SIMULATED_VENDORS = new Map<string, VendorSim>([
  ["groq", openAiFamily("groq")],
  ["openai", openAiFamily("openai")],
  ["anthropic", anthropic],
  ["gemini", gemini],
]);

function flattenHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  const flat: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined) flat[name] = Array.isArray(value) ? value.join(", ") : value;
  }
  return flat;
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks);
}

function answer(vendor: VendorSim, req: SimRequest, state: SimState): Reply {
  try {
    const refusal = vendor.authenticate(req);
    if (refusal) return vendor.errorReply(refusal, req);
    const route = vendor.route(req);
    if (!route) return vendor.errorReply(vendor.notFound(req), req);
    return route(req, state);
  } catch (error) {
    if (error instanceof SimulatedError) return vendor.errorReply(error, req);
    // A request the simulator cannot handle shows up as the vendor's 500, never as a crash.
    return vendor.errorReply(new SimulatedError(500, `Simulator failure: ${(error as Error).message}`), req);
  }
}

function faultReply(vendor: VendorSim, req: SimRequest, fault: Extract<Fault, { kind: "status" }>): Reply {
  const reply =
    fault.body === undefined
      ? vendor.errorReply(new SimulatedError(fault.status, defaultMessage(fault.status)), req)
      : typeof fault.body === "string" || Buffer.isBuffer(fault.body)
        ? { status: fault.status, headers: { "content-type": "text/plain; charset=utf-8" }, body: fault.body }
        : jsonReply(fault.body, fault.status);
  return { ...reply, status: fault.status, headers: { ...reply.headers, ...fault.headers } };
}

function writeChunk(res: ServerResponse, chunk: string | Buffer): Promise<void> {
  return new Promise((resolve) => res.write(chunk, () => resolve()));
}

/** Ends the connection abruptly once what was written has reached the socket. */
async function resetConnection(res: ServerResponse, wroteAnything: boolean): Promise<void> {
  if (!wroteAnything) {
    res.flushHeaders();
    // Headers leave on the next turn (Node corks the socket for one tick).
    await nextLoop();
  }
  res.socket?.destroy();
}

export async function startSimulator(options: SimulatorOptions = {}): Promise<Simulator> {
  const host = options.host ?? "127.0.0.1";
  const record = options.record ?? true;
  let chunkDelayMs = options.chunkDelayMs ?? 0;
  const requests: RecordedRequest[] = [];
  const faults: { rule: FaultRule; remaining: number }[] = [];
  const state = new SimState();
  const inFlight = new Set<AbortController>();

  function takeFault(vendor: VendorName, fullPath: string): Fault | undefined {
    const index = faults.findIndex(
      ({ rule }) =>
        (rule.vendor === undefined || rule.vendor === vendor) &&
        (rule.pathIncludes === undefined || fullPath.includes(rule.pathIncludes)),
    );
    const entry = faults[index];
    if (!entry) return undefined;
    if (--entry.remaining <= 0) faults.splice(index, 1);
    return entry.rule.fault;
  }

  async function send(
    res: ServerResponse,
    reply: Reply,
    headers: Record<string, string>,
    signal: AbortSignal,
    resetAfterChunks: number | undefined,
  ): Promise<void> {
    const allHeaders = { ...reply.headers, ...headers };
    if ("body" in reply) {
      const body = typeof reply.body === "string" ? Buffer.from(reply.body) : reply.body;
      allHeaders["content-length"] = String(body.length);
      res.writeHead(reply.status, allHeaders);
      if (resetAfterChunks === undefined) {
        res.end(body);
        return;
      }
      // A whole answer is cut in the middle of its body.
      await writeChunk(res, body.subarray(0, Math.max(1, body.length >> 1)));
      await resetConnection(res, true);
      return;
    }
    res.writeHead(reply.status, allHeaders);
    // A reset always leaves the stream incomplete: at the latest before its last chunk.
    const stopAt = resetAfterChunks === undefined ? -1 : Math.min(resetAfterChunks, reply.chunks.length - 1);
    for (let i = 0; i < reply.chunks.length; i++) {
      if (i === stopAt) {
        await resetConnection(res, i > 0);
        return;
      }
      if (i > 0 && chunkDelayMs > 0) await sleep(chunkDelayMs, undefined, { signal });
      const chunk = reply.chunks[i] as string | Buffer;
      if (stopAt === -1) res.write(chunk);
      else await writeChunk(res, chunk);
    }
    res.end();
  }

  async function serve(req: IncomingMessage, res: ServerResponse, signal: AbortSignal): Promise<void> {
    const url = req.url ?? "/";
    const queryAt = url.indexOf("?");
    const fullPath = queryAt === -1 ? url : url.slice(0, queryAt);
    const query = queryAt === -1 ? "" : url.slice(queryAt + 1);
    const slash = fullPath.indexOf("/", 1);
    const vendorName = fullPath.slice(1, slash === -1 ? undefined : slash) as VendorName;
    const vendor = SIMULATED_VENDORS.get(vendorName);
    const body = await readBody(req);
    if (!vendor) {
      const message = "No simulated vendor here: use /groq, /openai, /anthropic or /gemini.";
      await send(
        res,
        jsonReply({ error: { message, type: "not_found" } }, 404),
        SIMULATED,
        signal,
        undefined,
      );
      return;
    }
    const method = req.method ?? "GET";
    const path = slash === -1 ? "/" : fullPath.slice(slash);
    if (record)
      requests.push({ vendor: vendorName, method, path, query, headers: flattenHeaders(req.headers), body });
    const simReq: SimRequest = {
      vendor: vendorName,
      method,
      path,
      query: new URLSearchParams(query),
      headers: req.headers,
      body,
      requestId: state.nextId("req_"),
    };
    const headers = { ...vendor.headers(simReq), ...SIMULATED };
    const fault = takeFault(vendorName, fullPath);
    switch (fault?.kind) {
      case "hang":
        // Never answered: the client gives up, or close() ends the connection.
        return;
      case "status":
        await send(res, faultReply(vendor, simReq, fault), headers, signal, undefined);
        return;
      case "slowFirstByte":
        await sleep(fault.ms, undefined, { signal });
        break;
    }
    const reply = answer(vendor, simReq, state);
    await send(res, reply, headers, signal, fault?.kind === "resetMidStream" ? fault.afterChunks : undefined);
  }

  const server = createServer((req, res) => {
    const abort = new AbortController();
    inFlight.add(abort);
    res.once("close", () => {
      abort.abort();
      inFlight.delete(abort);
    });
    serve(req, res, abort.signal).catch(() => {
      // The client went away or close() stopped a pause: nothing is left to answer to.
      res.destroy();
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const url = `http://${host.includes(":") ? `[${host}]` : host}:${port}`;

  return {
    url,
    origins: {
      groq: `${url}/groq`,
      openai: `${url}/openai`,
      anthropic: `${url}/anthropic`,
      gemini: `${url}/gemini`,
    },
    requests,
    inject(rule) {
      faults.push({ rule, remaining: rule.times ?? 1 });
    },
    setChunkDelay(ms) {
      chunkDelayMs = ms;
    },
    reportUsage(vendor, usage) {
      state.usage.add(vendor, usage);
    },
    reset() {
      requests.length = 0;
      faults.length = 0;
      state.clear();
    },
    close() {
      for (const abort of inFlight) abort.abort();
      return new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}
