import type { AuthContext } from "../core/auth";

/** Hono environment shared by every app: the authenticated caller once the auth middleware ran. */
export interface AppEnv {
  Variables: { auth: AuthContext };
  // Node (`incoming`) or Lambda (`event`) host objects; only rawTarget() reads them.
  Bindings: { incoming?: { url?: string }; event?: { rawPath?: string; path?: string } };
}
