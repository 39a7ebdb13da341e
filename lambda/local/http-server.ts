import { readFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import { createServer as createNetServer, type Socket } from "node:net";
import { getRequestListener, RequestError } from "@hono/node-server";
import { SECURITY_HEADERS } from "../app/security-headers";
import { type ApiError, errors } from "../core/errors";

// biome-ignore lint/suspicious/noExplicitAny: the host passes its own env object
type Fetch = (request: Request, env: any) => Response | Promise<Response>;

export interface HttpServerOptions {
  fetch: Fetch;
  tls?: { cert: string; key: string };
  /**
   * The HTTPS origin plain requests are redirected to (`https://api.example.com`); by default the
   * listening host and port. Never the client's Host header, which anyone can set.
   */
  publicUrl?: string;
  /** Longest wait from a connection's start (TLS handshake included) to a complete request head. */
  headersTimeoutMs: number;
  /** Most connections one client address may hold open at once; more are closed at once. */
  maxConnectionsPerClient: number;
  /** Gets one access-log line per request answered (see `accessLogLine`); none when absent. */
  accessLog?: (line: string) => void;
}

const REASONS: Record<number, string> = {
  400: "Bad Request",
  408: "Request Timeout",
  429: "Too Many Requests",
  431: "Request Header Fields Too Large",
};

export interface RunningServer {
  /** The listening server (a TCP front that sniffs TLS when TLS is on). */
  listen(port: number, host: string): Promise<number>;
  /** Stops accepting, lets requests in flight finish (up to `graceMs`), then closes every connection. */
  close(graceMs: number): Promise<void>;
}

/** A response written straight to the socket, for requests Node refuses before any app sees them. */
function rawErrorResponse(err: ApiError): string {
  const body = JSON.stringify(err.toBody());
  const headers = Object.entries({
    "Content-Type": "application/json",
    "Content-Length": String(Buffer.byteLength(body)),
    Connection: "close",
    ...SECURITY_HEADERS,
  })
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join("");
  return `HTTP/1.1 ${err.status} ${REASONS[err.status] ?? "Bad Request"}\r\n${headers}\r\n${body}`;
}

/**
 * Requests the host adapter cannot turn into a fetch Request (missing or bad Host, a backslash in the
 * path, a target like `*`) are the client's fault: 400, not 500.
 */
function adapterRefusal(err: unknown): ApiError {
  if (!(err instanceof RequestError)) return errors.internal();
  if (err.message === "Backslash in request path") {
    return errors.invalidPath("encoded slashes, backslashes and NUL are not allowed.");
  }
  return errors.badRequest("malformed_request", "The HTTP request is malformed.");
}

function onClientError(err: NodeJS.ErrnoException, socket: Socket): void {
  // A failed or timed-out TLS handshake has no channel to answer on.
  const tlsFailure = err.code?.startsWith("ERR_TLS") || err.code?.startsWith("ERR_SSL");
  if (err.code === "ECONNRESET" || tlsFailure || !socket.writable) {
    socket.destroy();
    return;
  }
  const apiError =
    err.code === "HPE_HEADER_OVERFLOW"
      ? errors.headersTooLarge()
      : err.code === "ERR_HTTP_REQUEST_TIMEOUT"
        ? errors.requestTimeout()
        : errors.badRequest("malformed_request", "The HTTP request is malformed.");
  socket.end(rawErrorResponse(apiError));
}

/**
 * `GET /openai/v1/models 200 12ms <transaction id>`: method, path, status, duration, transaction id.
 * The query string is left out (Gemini's `?key=` carries a key there); headers and bodies are never read.
 */
function accessLogLine(
  req: IncomingMessage,
  res: ServerResponse,
  startedAt: number,
  transactionId: string | undefined,
): string {
  const path = (req.url ?? "").split("?", 1)[0];
  const took = `${Math.round(performance.now() - startedAt)}ms`;
  const parts = [req.method ?? "-", path, String(res.statusCode), took];
  if (transactionId) parts.push(transactionId);
  // A response cut before its end (client gone, stream failed) says so.
  if (!res.writableFinished) parts.push("(incomplete)");
  return parts.join(" ");
}

/**
 * The fetch handler, noting each response's transaction id for the access log: the adapter writes
 * headers in one `writeHead`, which the response object does not keep. A synchronous answer stays
 * synchronous (the adapter has a faster path for it).
 */
function notingTransactionIds(fetch: Fetch, ids: WeakMap<ServerResponse, string>): Fetch {
  return (request, env: { outgoing?: ServerResponse }) => {
    const note = (response: Response) => {
      const id = response.headers.get("x-dmt-transaction-id");
      if (id && env.outgoing) ids.set(env.outgoing, id);
      return response;
    };
    const answer = fetch(request, env);
    return answer instanceof Promise ? answer.then(note) : note(answer);
  };
}

/**
 * Serves a fetch handler over HTTP, or over HTTPS when given a certificate, in which case plain HTTP
 * on the same port gets a 308 redirect to the public HTTPS URL (the first byte tells a TLS handshake
 * apart).
 */
export function createHttpServer(options: HttpServerOptions): RunningServer {
  const accessLog = options.accessLog;
  const transactionIds = new WeakMap<ServerResponse, string>();
  const fetch = accessLog ? notingTransactionIds(options.fetch, transactionIds) : options.fetch;
  const listener = getRequestListener(fetch, {
    errorHandler: (err) => {
      const apiError = adapterRefusal(err);
      return new Response(JSON.stringify(apiError.toBody()), {
        status: apiError.status,
        headers: { "Content-Type": "application/json", ...SECURITY_HEADERS },
      });
    },
  });
  let inFlight = 0;
  const tracked = (req: IncomingMessage, res: ServerResponse) => {
    inFlight++;
    const startedAt = performance.now();
    res.once("close", () => {
      inFlight--;
      accessLog?.(`${accessLogLine(req, res, startedAt, transactionIds.get(res))}\n`);
    });
    void listener(req, res);
  };
  const headersTimeout = options.headersTimeoutMs;
  const serverOptions = {
    // Node answers a missing Host with a bare 400 of its own; let it reach the adapter's refusal instead.
    requireHostHeader: false,
    // Slow loris: a head that is not complete in time gets 408 and the connection closes. Node checks
    // at this interval, so it is a fraction of the timeout.
    headersTimeout,
    requestTimeout: Math.max(300_000, headersTimeout + 1),
    connectionsCheckingInterval: Math.max(50, Math.min(5000, Math.floor(headersTimeout / 4))),
  };
  const app: Server = options.tls
    ? createHttpsServer(
        {
          ...serverOptions,
          handshakeTimeout: headersTimeout,
          cert: readFileSync(options.tls.cert),
          key: readFileSync(options.tls.key),
        },
        tracked,
      )
    : createServer(serverOptions, tracked);
  app.on("clientError", onClientError);

  let redirectOrigin = options.publicUrl?.replace(/\/$/, "");
  const redirect = createServer(serverOptions, (req, res) => {
    // Only a path is kept: an absolute-form target (`GET http://evil.example/`) names no place of ours.
    const target = req.url?.startsWith("/") ? req.url : "/";
    res.writeHead(308, {
      Location: `${redirectOrigin}${target}`,
      "Content-Length": "0",
      ...SECURITY_HEADERS,
    });
    res.end();
  });
  redirect.on("clientError", onClientError);
  // Node starts its connection tracking (headersTimeout, requestTimeout, closeIdleConnections) on
  // 'listening'; these two only get sockets handed over by the front, so start it here.
  app.emit("listening");
  redirect.emit("listening");

  const sockets = new Set<Socket>();
  const maxPerClient = options.maxConnectionsPerClient;
  const perClient = new Map<string, number>();
  // No Nagle: streamed chunks must leave as soon as they are written.
  const front = createNetServer({ noDelay: true }, (socket) => {
    // A client may reset a socket before any server owns it; an error without a listener would throw.
    socket.on("error", () => socket.destroy());
    const client = socket.remoteAddress ?? "";
    const held = perClient.get(client) ?? 0;
    if (held >= maxPerClient) {
      // Plain HTTP gets a reason it can read; a TLS client would only see garbage, so it is cut.
      if (options.tls) socket.destroy();
      else socket.end(rawErrorResponse(errors.tooManyConnections(maxPerClient))).resume(); // reads to the client's FIN
      return;
    }
    perClient.set(client, held + 1);
    sockets.add(socket);
    socket.once("close", () => {
      sockets.delete(socket);
      const left = (perClient.get(client) ?? 1) - 1;
      if (left === 0) perClient.delete(client);
      else perClient.set(client, left);
    });
    if (!options.tls) {
      app.emit("connection", socket);
      return;
    }
    // Until its first byte tells TLS from plain HTTP, no server watches the socket: bound the wait here.
    const silent = setTimeout(() => socket.destroy(), headersTimeout);
    socket.once("close", () => clearTimeout(silent));
    socket.once("data", (first: Buffer) => {
      clearTimeout(silent);
      socket.pause();
      socket.unshift(first);
      (first[0] === 0x16 ? app : redirect).emit("connection", socket);
      process.nextTick(() => socket.resume());
    });
  });

  return {
    listen: (port, host) =>
      new Promise((resolve, reject) => {
        front.once("error", (err) => reject(listenError(err, port, host)));
        front.listen(port, host, () => {
          const listening = (front.address() as { port: number }).port;
          redirectOrigin ??= `https://${host.includes(":") ? `[${host}]` : host}:${listening}`;
          resolve(listening);
        });
      }),
    async close(graceMs) {
      await new Promise<void>((resolve) => {
        front.close(() => resolve());
        app.closeIdleConnections();
        const deadline = Date.now() + graceMs;
        const drain = setInterval(() => {
          app.closeIdleConnections();
          if (inFlight === 0 || Date.now() > deadline) {
            clearInterval(drain);
            for (const socket of sockets) socket.destroy();
            app.close(); // stops the tracking timers
            redirect.close();
          }
        }, 25);
      });
    },
  };
}

/** Why the server cannot listen, saying which setting to change (the code stays for searches). */
function listenError(err: NodeJS.ErrnoException, port: number, host: string): Error {
  const where = `${host.includes(":") ? `[${host}]` : host}:${port}`;
  const notHere = `${host} is not an address of this machine: set HOST to one, such as 127.0.0.1`;
  const advice: Record<string, string> = {
    EADDRINUSE: `${where} is already in use: stop what listens there, or set PORT to another port`,
    EADDRNOTAVAIL: notHere,
    ENOTFOUND: notHere,
    EACCES: `port ${port} needs privileges here: set PORT to 1024 or above`,
  };
  const said = err.code === undefined ? undefined : advice[err.code];
  return said === undefined
    ? err
    : new Error(`Cannot listen on ${where} (${err.code}): ${said}.`, { cause: err });
}
