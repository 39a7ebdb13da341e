import type { AuthContext } from "../core/auth";

/** Hono environment shared by every app: the authenticated caller once the auth middleware ran. */
export interface AppEnv {
  Variables: { auth: AuthContext };
  // Node (`incoming`, `outgoing`) or Lambda (`event`) host objects: rawTarget() reads the request
  // target, watchCaller() the response's early close.
  Bindings: {
    incoming?: { url?: string };
    outgoing?: NodeResponse;
    event?: { rawPath?: string; path?: string };
  };
}

/** The parts of Node's `ServerResponse` the proxy reads. */
export interface NodeResponse {
  readonly closed: boolean;
  readonly writableFinished: boolean;
  on(event: "close", listener: () => void): unknown;
}
