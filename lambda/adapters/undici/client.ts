// The pool and its request API one by one: the package root brings all of undici (fetch, WebSocket,
// cache...), ~240 KB more in the proxy bundle (undici-parts.d.ts types them).
import requestOn from "undici/lib/api/api-request.js";
import Pool from "undici/lib/dispatcher/pool.js";
// What else the package root did: make this undici the dispatcher of the process's global fetch
// (Node 20 bundles undici 6). Clients of the local server in the same process rely on its handling
// of connections the server closes (a keep-alive socket after a refused upload).
import "undici/lib/global.js";

export interface UpstreamRequest {
  method: string;
  /** Path and query on the vendor, below the configured base path. */
  path: string;
  headers: Record<string, string>;
  body?: Uint8Array;
  signal?: AbortSignal;
}

/** A vendor response: a status (errors included), headers, and a body to read or destroy. */
export interface UpstreamResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: AsyncIterable<Uint8Array> & { destroy(error?: Error): void };
}

export interface UpstreamClient {
  request(request: UpstreamRequest): Promise<UpstreamResponse>;
  /** Ends every connection, calls in flight included (the server drained them before). */
  close(): Promise<void>;
}

export interface UpstreamOptions {
  /** Origin plus optional base path: `https://api.groq.com/openai`. */
  target: string;
  connectTimeoutMs: number;
  /** Longest wait for the first byte, and between two chunks of a body. */
  idleTimeoutMs: number;
}

/**
 * One vendor's upstream over undici: a keep-alive pool to its origin (connections are reused across
 * calls), the vendor's base path prefixed to every path. The host is fixed here; callers only choose
 * a path from their route table.
 */
export function createUpstreamClient(options: UpstreamOptions): UpstreamClient {
  const url = new URL(options.target);
  const basePath = url.pathname.replace(/\/+$/, "");
  const pool = new Pool(url.origin, {
    connectTimeout: options.connectTimeoutMs,
    headersTimeout: options.idleTimeoutMs,
    bodyTimeout: options.idleTimeoutMs,
  });
  return {
    async request(request) {
      const response = await requestOn.call(pool, {
        method: request.method as "GET" | "POST",
        path: basePath + request.path,
        headers: request.headers,
        body: request.body ?? null,
        signal: request.signal ?? null,
      });
      return { status: response.statusCode, headers: response.headers, body: response.body };
    },
    close: () => pool.destroy(),
  };
}
