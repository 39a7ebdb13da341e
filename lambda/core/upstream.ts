/** The upstream port: how the proxy reaches a vendor (undici in adapters/undici/client.ts). */
export interface UpstreamRequest {
  method: string;
  /** Path and query on the vendor, below the configured base path. */
  path: string;
  headers: Record<string, string>;
  body?: Uint8Array;
  /** The caller of the proxy: when it leaves, the request is dropped, wherever it is. */
  caller?: CallerWatch;
}

/** Whether the caller left before its answer was sent, and a way to hear of it. */
export interface CallerWatch {
  readonly gone: boolean;
  /** Calls `listener` once, if the caller leaves. */
  onGone(listener: () => void): void;
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
