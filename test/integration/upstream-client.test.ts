import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createUpstreamClient } from "../../lambda/adapters/undici/client";
import { upstreamFailureKind } from "../../lambda/adapters/undici/errors";
import type { CallerWatch, UpstreamClient } from "../../lambda/core/upstream";

/**
 * The vendor leg over undici's handler interface, against a local vendor whose handler each test
 * sets: what arrives, what comes back, and what happens when the caller leaves, the reader falls
 * behind or the vendor stalls.
 */
type Handler = (req: IncomingMessage, res: ServerResponse, body: Buffer) => void;

let vendor: Server;
let handle: Handler;
let client: UpstreamClient;
let origin: string;

beforeAll(async () => {
  vendor = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => handle(req, res, Buffer.concat(chunks)));
  });
  await new Promise<void>((resolve) => vendor.listen(0, "127.0.0.1", resolve));
  origin = `http://127.0.0.1:${(vendor.address() as AddressInfo).port}`;
  client = createUpstreamClient({ target: `${origin}/base/`, connectTimeoutMs: 5000, idleTimeoutMs: 30_000 });
});
afterEach(() => {
  handle = () => {
    throw new Error("no handler set");
  };
});
afterAll(async () => {
  await client.close();
  vendor.closeAllConnections();
  await new Promise((resolve) => vendor.close(resolve));
});

/** A caller the test makes leave. */
function caller(): CallerWatch & { leave(): void } {
  const listeners: (() => void)[] = [];
  const watch = {
    gone: false,
    onGone: (listener: () => void) => void listeners.push(listener),
    leave() {
      watch.gone = true;
      for (const listener of listeners) listener();
    },
  };
  return watch;
}

/** Resolves when the vendor sees its side of the exchange close before it answered in full. */
function closedEarly(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => res.on("close", () => !res.writableFinished && resolve()));
}

/**
 * Sets the vendor to answer a stream's head and first event, then hold the rest; resolves, once
 * called, when the vendor's side closed before the answer was complete.
 */
function sendOneEventThenHold(): () => Promise<void> {
  let closed: Promise<void> | undefined;
  handle = (_req, res) => {
    closed = closedEarly(res);
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.write("data: 1\n\n");
  };
  return () => closed as Promise<void>;
}

async function readAll(body: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const chunks: Uint8Array[] = [];
  for await (const chunk of body) chunks.push(chunk);
  return Buffer.concat(chunks);
}

const post = (extra: { caller?: CallerWatch; path?: string } = {}) =>
  client.request({
    method: "POST",
    path: extra.path ?? "/v1/chat/completions?x=1",
    headers: { "content-type": "application/json", authorization: "Bearer sk-vendor" },
    body: Buffer.from('{"model":"m"}'),
    ...(extra.caller ? { caller: extra.caller } : {}),
  });

describe("the upstream client", () => {
  it("sends the method, base path, headers and body, and returns status, headers and the body in order", async () => {
    let seen: { method?: string; url?: string; auth?: string; body?: string } = {};
    handle = (req, res, body) => {
      seen = { method: req.method, url: req.url, auth: req.headers.authorization, body: body.toString() };
      res.writeHead(201, [
        ["Content-Type", "text/plain"],
        ["Set-Cookie", "a=1"],
        ["Set-Cookie", "b=2"],
      ]);
      res.write("first,");
      setImmediate(() => res.end("second"));
    };
    const response = await post();
    expect(response.status).toBe(201);
    expect(response.headers["content-type"]).toBe("text/plain");
    expect(response.headers["set-cookie"]).toEqual(["a=1", "b=2"]);
    expect((await readAll(response.body)).toString()).toBe("first,second");
    expect(seen).toEqual({
      method: "POST",
      url: "/base/v1/chat/completions?x=1",
      auth: "Bearer sk-vendor",
      body: '{"model":"m"}',
    });
  });

  it("passes a vendor's error status through as a response, not a failure", async () => {
    handle = (_req, res) => {
      res.writeHead(429, { "content-type": "application/json" });
      res.end('{"error":"slow down"}');
    };
    const response = await post();
    expect(response.status).toBe(429);
    expect((await readAll(response.body)).toString()).toBe('{"error":"slow down"}');
  });

  it("drops the request when the caller leaves before the vendor answers", async () => {
    const watch = caller();
    let vendorSawClose: Promise<void> | undefined;
    const arrived = new Promise<void>((resolve) => {
      handle = (_req, res) => {
        vendorSawClose = closedEarly(res);
        resolve();
      };
    });
    const response = post({ caller: watch });
    await arrived;
    watch.leave();
    const err = await response.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ code: "UND_ERR_ABORTED" });
    await vendorSawClose;
  });

  it("never sends the request of a caller already gone", async () => {
    let reached = 0;
    handle = (_req, res) => {
      reached++;
      res.end("{}");
    };
    const watch = caller();
    watch.leave();
    await expect(post({ caller: watch })).rejects.toMatchObject({ code: "UND_ERR_ABORTED" });
    // The next request on the pool is answered, and is the first the vendor saw.
    expect((await post()).status).toBe(200);
    expect(reached).toBe(1);
  });

  it("breaks the body off when the caller leaves in the middle of it, and tells the vendor", async () => {
    const watch = caller();
    const vendorSawClose = sendOneEventThenHold();
    const response = await post({ caller: watch });
    const iterator = response.body[Symbol.asyncIterator]();
    expect(Buffer.from((await iterator.next()).value as Uint8Array).toString()).toBe("data: 1\n\n");
    watch.leave();
    await expect(iterator.next()).rejects.toMatchObject({ code: "UND_ERR_ABORTED" });
    await vendorSawClose();
  });

  it("ends the exchange when the reader destroys the body", async () => {
    const vendorSawClose = sendOneEventThenHold();
    const response = await post();
    const iterator = response.body[Symbol.asyncIterator]();
    await iterator.next();
    response.body.destroy();
    await vendorSawClose();
    await expect(iterator.next()).rejects.toMatchObject({ code: "UND_ERR_ABORTED" });
  });

  it("ends the exchange when the reader stops iterating early", async () => {
    const vendorSawClose = sendOneEventThenHold();
    const response = await post();
    for await (const _chunk of response.body) break;
    await vendorSawClose();
  });

  it("holds the vendor back while the reader is behind, then delivers every byte", async () => {
    const chunk = Buffer.alloc(64 * 1024, "x");
    const total = 400; // 25 MB: far more than the sockets' buffers hold
    let written = 0;
    let finished = false;
    let done: () => void = () => {};
    const vendorDone = new Promise<void>((resolve) => {
      done = resolve;
    });
    handle = (_req, res) => {
      res.writeHead(200, { "content-type": "application/octet-stream" });
      const pump = () => {
        while (written < total) {
          written++;
          if (!res.write(chunk)) {
            res.once("drain", pump);
            return;
          }
        }
        res.end(() => {
          finished = true;
          done();
        });
      };
      pump();
    };
    const response = await post();
    const iterator = response.body[Symbol.asyncIterator]();
    let bytes = ((await iterator.next()).value as Uint8Array).byteLength;
    // The reader stops: the vendor's writes must stall short of the end. (A reader that did not hold
    // the socket back would take all 25 MB in meanwhile; a stalled vendor never finishes, however slow
    // the machine.)
    for (let before = -1; before !== written; ) {
      before = written;
      await new Promise((resolve) => setTimeout(resolve, 300));
    }
    expect(finished).toBe(false);
    expect(written).toBeLessThan(total);
    for (let next = await iterator.next(); !next.done; next = await iterator.next())
      bytes += next.value.byteLength;
    await vendorDone;
    expect(bytes).toBe(total * chunk.byteLength);
  });

  it("fails a body the vendor stops sending with the idle timeout, which the proxy answers as 504", async () => {
    const impatient = createUpstreamClient({ target: origin, connectTimeoutMs: 5000, idleTimeoutMs: 1000 });
    try {
      handle = (_req, res) => {
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.write("data: 1\n\n");
      };
      const stalled = async () => {
        const response = await impatient.request({ method: "GET", path: "/stall", headers: {} });
        const iterator = response.body[Symbol.asyncIterator]();
        await iterator.next();
        await iterator.next();
      };
      const err = await stalled().then(
        () => undefined,
        (e: unknown) => e,
      );
      // The body's timeout; on a machine too busy to read the answer's head within the same idle
      // time, the head's. The proxy answers both with 504.
      expect(["UND_ERR_BODY_TIMEOUT", "UND_ERR_HEADERS_TIMEOUT"]).toContain((err as { code?: string })?.code);
      expect(upstreamFailureKind(err, false)).toBe("timeout");
    } finally {
      await impatient.close();
    }
  });
});
