// The pool and the header parser one by one: the package root brings all of undici (fetch, WebSocket,
// cache...), ~240 KB more in the proxy bundle (undici-parts.d.ts types them).
import { RequestAbortedError } from "undici/lib/core/errors.js";
import { parseHeaders } from "undici/lib/core/util.js";
import Pool from "undici/lib/dispatcher/pool.js";
// What else the package root did: make this undici the dispatcher of the process's global fetch
// (Node 20 bundles undici 6). Clients of the local server in the same process rely on its handling
// of connections the server closes (a keep-alive socket after a refused upload).
import "undici/lib/global.js";
import type { CallerWatch, UpstreamClient, UpstreamResponse } from "../../core/upstream";

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
    request(request) {
      return new Promise((resolve, reject) => {
        pool.dispatch(
          {
            method: request.method as "GET" | "POST",
            path: basePath + request.path,
            headers: request.headers,
            body: request.body ?? null,
          },
          new Exchange(resolve, reject, request.caller),
        );
      });
    },
    close: () => pool.destroy(),
  };
}

/** Past this many bytes unread, the socket is paused until the reader catches up. */
const HIGH_WATER_MARK = 64 * 1024;

/**
 * One request on undici's handler interface. Its request API would wrap the body in a Node stream
 * read through an async iterator, and track the call as an async resource. Here the body's chunks go
 * to its reader as they come: the vendor leg costs a third less CPU (a throwaway micro-benchmark
 * against a local server, 108 µs a call against 154 with an AbortController). Its errors are
 * undici's own, as the request API's are.
 */
class Exchange {
  private abortConnection?: (reason: Error) => void;
  private body?: UpstreamBody;
  private reason?: Error;
  private settled = false;

  constructor(
    private readonly resolve: (response: UpstreamResponse) => void,
    private readonly reject: (error: Error) => void,
    caller?: CallerWatch,
  ) {
    if (caller?.gone) this.reason = new RequestAbortedError();
    else caller?.onGone(() => this.abort(new RequestAbortedError()));
  }

  onConnect(abort: (reason: Error) => void): void {
    if (this.reason) abort(this.reason);
    else this.abortConnection = abort;
  }

  onHeaders(status: number, rawHeaders: Buffer[], resume: () => void): boolean {
    if (status < 200) return true; // 100 Continue and the like: the answer is still to come.
    this.body = new UpstreamBody(resume, (reason) => this.abort(reason));
    this.resolve({ status, headers: parseHeaders(rawHeaders), body: this.body });
    return true;
  }

  onData(chunk: Buffer): boolean {
    return this.body?.push(chunk) ?? true;
  }

  onComplete(): void {
    this.settled = true;
    this.body?.end();
  }

  onError(error: Error): void {
    this.settled = true;
    if (this.body) this.body.fail(error);
    else this.reject(error);
  }

  private abort(reason: Error): void {
    if (this.settled) return;
    this.reason ??= reason;
    this.abortConnection?.(reason);
  }
}

/** A response body read once, front to back; `destroy` drops the rest and ends the exchange. */
class UpstreamBody implements AsyncIterable<Uint8Array>, AsyncIterator<Uint8Array> {
  private readonly chunks: Uint8Array[] = [];
  private buffered = 0;
  private paused = false;
  private ended = false;
  private error?: Error;
  private waiter?: { resolve: (result: IteratorResult<Uint8Array>) => void; reject: (error: Error) => void };

  constructor(
    private readonly resume: () => void,
    private readonly abort: (reason: Error) => void,
  ) {}

  [Symbol.asyncIterator](): AsyncIterator<Uint8Array> {
    return this;
  }

  /** False when the reader is behind: undici then pauses the socket until `next` resumes it. */
  push(chunk: Uint8Array): boolean {
    if (this.waiter) {
      this.take().resolve({ value: chunk, done: false });
      return true;
    }
    this.chunks.push(chunk);
    this.buffered += chunk.byteLength;
    this.paused = this.buffered > HIGH_WATER_MARK;
    return !this.paused;
  }

  end(): void {
    this.ended = true;
    if (this.waiter) this.take().resolve({ value: undefined, done: true });
  }

  fail(error: Error): void {
    if (this.ended) return;
    this.ended = true;
    this.error = error;
    this.chunks.length = 0;
    if (this.waiter) this.take().reject(error);
  }

  next(): Promise<IteratorResult<Uint8Array>> {
    const chunk = this.chunks.shift();
    if (chunk) {
      this.buffered -= chunk.byteLength;
      if (this.paused && this.buffered <= HIGH_WATER_MARK) {
        this.paused = false;
        this.resume();
      }
      return Promise.resolve({ value: chunk, done: false });
    }
    if (this.error) return Promise.reject(this.error);
    if (this.ended) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve, reject) => {
      this.waiter = { resolve, reject };
    });
  }

  /** A reader that stops early (a `break` out of `for await`) ends the exchange, as with a stream. */
  return(): Promise<IteratorResult<Uint8Array>> {
    this.destroy();
    return Promise.resolve({ value: undefined, done: true });
  }

  destroy(error?: Error): void {
    if (this.ended) return;
    this.fail(error ?? new RequestAbortedError());
    this.abort(this.error as Error);
  }

  private take() {
    const waiter = this.waiter as NonNullable<typeof this.waiter>;
    this.waiter = undefined;
    return waiter;
  }
}
