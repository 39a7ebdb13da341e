import type { IncomingMessage, ServerResponse } from "node:http";
import { RESPONSE_ALREADY_SENT } from "@hono/node-server/utils/response";
import { createLocalJWKSet } from "jose";
import { bundleWeb, type WebFiles } from "../../web/build";
import { createWebApp } from "../../web/serve";
import { DASHBOARD_API_PREFIX } from "../app/dashboard/app";
import { tokenVerifier } from "../app/dashboard/auth";
import type { AppEnv } from "../app/env";
import { composeDashboardApi, type DashboardApiSettings } from "../compose/dashboard-api";
import { localUserDirectory, OIDC_PREFIX, startLocalOidc } from "./oidc";

/**
 * The dashboard on the local server: the identity provider at `/oidc`, the dashboard API at
 * `/dashboard/api`, the SPA at `/dashboard`, all on one origin. The provider's issuer is that origin,
 * known once the server listens, so `start(origin)` completes the wiring; requests that arrive before
 * it wait for it.
 */
export interface LocalDashboard {
  handles(path: string): boolean;
  fetch(request: Request, env: AppEnv["Bindings"]): Promise<Response>;
  start(serverUrl: string): Promise<DashboardSignIn>;
}

/** What the startup banner (and the browser tests) need to sign in. */
export interface DashboardSignIn {
  url: string;
  email: string;
  password: string;
}

/** What @hono/node-server passes as the env: the Node request and response. */
interface NodeBindings {
  incoming?: IncomingMessage;
  outgoing?: ServerResponse;
}

export interface LocalDashboardDeps {
  dataDir: string;
  /** What the dashboard API reads and writes: the store, the warehouse's query layer, export settings, events. */
  infra: Parameters<typeof composeDashboardApi>[0];
  /** The dashboard API's settings but the token check, which the identity provider started here gives. */
  settings: Omit<DashboardApiSettings, "verifyToken">;
}

const under = (path: string, prefix: string) => path === prefix || path.startsWith(`${prefix}/`);

/** A wildcard listen address is no address a browser can use as an origin. */
function browserOrigin(serverUrl: string): string {
  const url = new URL(serverUrl);
  if (url.hostname === "0.0.0.0") url.hostname = "127.0.0.1";
  if (url.hostname === "[::]") url.hostname = "[::1]";
  return url.origin;
}

export function localDashboard(deps: LocalDashboardDeps): LocalDashboard {
  let ready: (fetch: LocalDashboard["fetch"]) => void = () => {};
  let failed: (err: unknown) => void = () => {};
  const started = new Promise<LocalDashboard["fetch"]>((resolve, reject) => {
    ready = resolve;
    failed = reject;
  });
  // Requests waiting on a failed start must not leave an unhandled rejection behind.
  started.catch(() => {});

  let bundle: Promise<WebFiles> | undefined;
  const files = () => {
    bundle ??= bundleWeb().catch((err: unknown) => {
      bundle = undefined; // the next request tries again
      throw err;
    });
    return bundle;
  };

  return {
    handles: (path) => under(path, OIDC_PREFIX) || under(path, "/dashboard"),
    fetch: (request, env) => started.then((fetch) => fetch(request, env)),
    async start(serverUrl) {
      try {
        const origin = browserOrigin(serverUrl);
        const oidc = await startLocalOidc({ origin, dataDir: deps.dataDir, logger: deps.infra.logger });
        const api = composeDashboardApi(deps.infra, {
          ...deps.settings,
          // Invitations find the local provider's users (the development user).
          directory: localUserDirectory(deps.dataDir),
          verifyToken: tokenVerifier({
            issuer: oidc.issuer,
            audience: oidc.audience,
            clientId: oidc.clientId,
            keys: createLocalJWKSet(oidc.jwks),
          }),
        });
        const web = createWebApp({
          origin,
          config: {
            issuer: oidc.issuer,
            clientId: oidc.clientId,
            scope: oidc.scope,
            apiBase: DASHBOARD_API_PREFIX,
          },
          files,
          logger: deps.infra.logger,
        });
        ready(async (request, env) => {
          const path = new URL(request.url).pathname;
          if (under(path, OIDC_PREFIX)) {
            const { incoming, outgoing } = env as NodeBindings;
            if (!incoming || !outgoing) throw new Error("the identity provider needs a Node server");
            oidc.handle(incoming, outgoing);
            return RESPONSE_ALREADY_SENT;
          }
          return (under(path, DASHBOARD_API_PREFIX) ? api : web).fetch(request, env);
        });
        return { url: `${origin}/dashboard/`, email: oidc.devUser.email, password: oidc.devUser.password };
      } catch (err) {
        failed(err);
        throw err;
      }
    },
  };
}
