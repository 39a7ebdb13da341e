import { createHash, randomBytes, randomUUID, timingSafeEqual } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import { join } from "node:path";
import { exportJWK, generateKeyPair, type JSONWebKeySet, type JWK } from "jose";
import { SECURITY_HEADERS } from "../app/security-headers";
import { errors } from "../core/errors";
import { errorFields, type Logger } from "../core/logger";
import type { UserDirectory } from "../core/members";
import { errorPage, loginPage, logoutPage, STYLESHEET, STYLESHEET_PATH, signedOutPage } from "./oidc-pages";

/**
 * The local stand-in for Amazon Cognito: an OpenID provider (oidc-provider) mounted at `/oidc` on the
 * local server's own origin, so the dashboard's calls to it stay same-origin under
 * `Content-Security-Policy: default-src 'self'`. One public client (the dashboard SPA) signs in with
 * the authorization code flow and PKCE; access tokens are JWTs for the dashboard API (RFC 9068, with
 * the API as resource indicator), signed with a key kept under the data dir so that sessions survive
 * a restart. One development user, whose credentials `npm start` prints.
 */

export const OIDC_PREFIX = "/oidc";
export const DASHBOARD_CLIENT_ID = "dmt-dashboard";
/** The scopes the dashboard asks for; `dashboard` is the dashboard API's own scope. */
export const DASHBOARD_SCOPE = "openid email profile dashboard";
const API_SCOPE = "dashboard";
/** The group claim Cognito puts in its tokens; the dashboard API reads operators from it. */
export const GROUPS_CLAIM = "cognito:groups";

export interface DevUser {
  sub: string;
  email: string;
  password: string;
}

export interface LocalOidc {
  issuer: string;
  clientId: string;
  /** The `aud` of access tokens: the dashboard API. */
  audience: string;
  scope: string;
  /** The public half of the signing keys: what the dashboard API verifies tokens with. */
  jwks: JSONWebKeySet;
  devUser: DevUser;
  /** Serves a request under `/oidc` (Node request and response: oidc-provider is a Koa app). */
  handle(req: IncomingMessage, res: ServerResponse): void;
}

/** What is kept under the data dir (mode 0600): the signing key, cookie keys and the development user. */
interface PersistedState {
  signingKey: JWK;
  cookieKeys: string[];
  devUser: DevUser;
}

async function loadState(dataDir: string): Promise<PersistedState> {
  const file = join(dataDir, "oidc.json");
  if (existsSync(file)) return JSON.parse(readFileSync(file, "utf8")) as PersistedState;
  // ES256: Cognito signs with RS256, but an EC key is made in a millisecond and the verifier takes both.
  const { privateKey } = await generateKeyPair("ES256", { extractable: true });
  const signingKey = { ...(await exportJWK(privateKey)), kid: randomUUID(), alg: "ES256", use: "sig" };
  const state: PersistedState = {
    signingKey,
    cookieKeys: [randomBytes(32).toString("base64url")],
    devUser: { sub: randomUUID(), email: "dev@dmt.local", password: randomBytes(12).toString("base64url") },
  };
  writeFileSync(file, JSON.stringify(state), { mode: 0o600 });
  return state;
}

/**
 * The local provider's users by email (only the development user), for `dmt members add`. Reads, or
 * first makes, the same state the server signs in with, so it works before the server first starts.
 */
export function localUserDirectory(dataDir: string): UserDirectory {
  return {
    async findUserId(email) {
      const { devUser } = await loadState(dataDir);
      return devUser.email === email ? devUser.sub : undefined;
    },
  };
}

function publicJwk(key: JWK): JWK {
  const { d: _private, ...rest } = key;
  return rest;
}

function sameSecret(a: string, b: string): boolean {
  const digest = (s: string) => createHash("sha256").update(s, "utf8").digest();
  return timingSafeEqual(digest(a), digest(b));
}

const FORM_LIMIT = 16 * 1024;

async function readForm(req: IncomingMessage): Promise<URLSearchParams> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.byteLength;
    if (size > FORM_LIMIT) throw new Error("form too large");
    chunks.push(chunk);
  }
  return new URLSearchParams(Buffer.concat(chunks).toString("utf8"));
}

function sendHtml(res: ServerResponse, status: number, html: string): void {
  res.statusCode = status;
  res.setHeader("Content-Type", "text/html; charset=utf-8");
  res.end(html);
}

interface ProviderSettings {
  origin: string;
  issuer: string;
  audience: string;
  state: PersistedState;
}

async function createProvider({ origin, issuer, audience, state }: ProviderSettings) {
  const { devUser } = state;
  const alg = state.signingKey.alg ?? "ES256";
  const { default: Provider, errors } = await import("oidc-provider");
  const { createMemoryAdapter } = await import("oidc-provider/lib/adapters/memory_adapter.js");

  const provider = new Provider(issuer, {
    // Sessions and codes live in memory: a restart signs the browser out of the provider, nothing more.
    adapter: createMemoryAdapter(),
    clients: [
      {
        client_id: DASHBOARD_CLIENT_ID,
        client_name: "dmt dashboard",
        application_type: "web",
        token_endpoint_auth_method: "none",
        grant_types: ["authorization_code"],
        response_types: ["code"],
        redirect_uris: [`${origin}/dashboard/callback`],
        post_logout_redirect_uris: [`${origin}/dashboard/signed-out`],
        id_token_signed_response_alg: alg,
      },
    ],
    jwks: { keys: [state.signingKey] },
    cookies: { keys: state.cookieKeys },
    scopes: ["openid", "email", "profile"],
    claims: { openid: ["sub"], email: ["email", "email_verified"], profile: ["name"] },
    // Like Cognito: the ID token carries the profile claims the dashboard shows.
    conformIdTokenClaims: false,
    pkce: { required: () => true },
    // The dashboard calls the provider from its own origin: no cross-origin caller is ever allowed.
    clientBasedCORS: (_ctx: unknown, requestOrigin: string) => requestOrigin === origin,
    ttl: {
      AccessToken: 3600,
      IdToken: 3600,
      AuthorizationCode: 60,
      Interaction: 600,
      Session: 86_400,
      Grant: 86_400,
    },
    findAccount: async (_ctx: unknown, sub: string) =>
      sub === devUser.sub
        ? {
            accountId: sub,
            claims: async () => ({ sub, email: devUser.email, email_verified: true, name: "Developer" }),
          }
        : undefined,
    // The development user is an operator, so operator-only screens can be tried locally.
    extraTokenClaims: async (_ctx: unknown, token: { kind: string; accountId?: string }) =>
      token.kind === "AccessToken" && token.accountId === devUser.sub
        ? { [GROUPS_CLAIM]: ["operators"] }
        : undefined,
    // The dashboard is a first-party client: consent is implied, never asked.
    loadExistingGrant: async (ctx: import("oidc-provider").OidcContext) => {
      const { client, session, result } = ctx.oidc;
      if (!client || !session?.accountId) return undefined;
      const grantId = result?.consent?.grantId ?? session.grantIdFor(client.clientId);
      const existing = grantId ? await ctx.oidc.provider.Grant.find(grantId) : undefined;
      if (existing) return existing;
      const grant = new ctx.oidc.provider.Grant({ accountId: session.accountId, clientId: client.clientId });
      grant.addOIDCScope("openid email profile");
      grant.addResourceScope(audience, API_SCOPE);
      await grant.save();
      return grant;
    },
    interactions: {
      url: (_ctx: unknown, interaction: { uid: string }) => `${OIDC_PREFIX}/interaction/${interaction.uid}`,
    },
    features: {
      devInteractions: { enabled: false },
      rpInitiatedLogout: {
        enabled: true,
        logoutSource: async (ctx: import("oidc-provider").OidcContext, form: string) => {
          ctx.type = "html";
          ctx.body = logoutPage(form);
        },
        postLogoutSuccessSource: async (ctx: import("oidc-provider").OidcContext) => {
          ctx.type = "html";
          ctx.body = signedOutPage();
        },
      },
      resourceIndicators: {
        enabled: true,
        defaultResource: async () => audience,
        useGrantedResource: async () => true,
        getResourceServerInfo: async (_ctx: unknown, resource: string) => {
          if (resource !== audience) throw new errors.InvalidTarget();
          return {
            scope: API_SCOPE,
            audience,
            accessTokenFormat: "jwt",
            accessTokenTTL: 3600,
            jwt: { sign: { alg } },
          };
        },
      },
    },
    renderError: async (
      ctx: import("oidc-provider").OidcContext,
      out: { error?: string; error_description?: string },
    ) => {
      ctx.type = "html";
      ctx.body = errorPage(
        "Sign-in failed",
        out.error_description ?? out.error ?? "The request was refused.",
      );
    },
  });
  return { provider, errors, callback: provider.callback() };
}

type Parts = Awaited<ReturnType<typeof createProvider>>;

/** The sign-in pages: the login form of the development user (consent is implied, see above). */
async function interaction(
  { provider, errors }: Parts,
  devUser: DevUser,
  req: IncomingMessage,
  res: ServerResponse,
  uid: string,
  action: string,
): Promise<void> {
  if (action === "abort") {
    await provider.interactionFinished(req, res, {
      error: "access_denied",
      error_description: "Sign-in was cancelled.",
    });
    return;
  }
  const details = await provider.interactionDetails(req, res);
  if (details.uid !== uid) throw new errors.SessionNotFound("interaction mismatch");
  if (action === "login" && req.method === "POST") {
    const form = await readForm(req);
    const email = form.get("email") ?? "";
    const password = form.get("password") ?? "";
    if (!sameSecret(email.trim().toLowerCase(), devUser.email) || !sameSecret(password, devUser.password)) {
      sendHtml(res, 401, loginPage({ uid, email, error: "Wrong email or password." }));
      return;
    }
    await provider.interactionFinished(
      req,
      res,
      { login: { accountId: devUser.sub } },
      { mergeWithLastSubmission: false },
    );
    return;
  }
  if (action === "" && req.method === "GET") {
    sendHtml(res, 200, loginPage({ uid }));
    return;
  }
  sendHtml(res, 404, errorPage("Not found", "There is no such page."));
}

const UNSAFE_PATH = /\/\.{1,2}(\/|$)|\/\/|%2e|%2f|%5c|%00|\\/i;
const INTERACTION = /^\/oidc\/interaction\/([A-Za-z0-9_-]{1,64})(?:\/(login|abort))?$/;

/**
 * `origin` is the local server's origin as a browser reaches it, e.g. `http://127.0.0.1:8787`. The
 * provider itself is built on first use, so a server nobody signs in to never loads it.
 */
export async function startLocalOidc(options: {
  origin: string;
  dataDir: string;
  logger: Logger;
}): Promise<LocalOidc> {
  const { origin, logger } = options;
  const state = await loadState(options.dataDir);
  const { devUser } = state;
  const issuer = `${origin}${OIDC_PREFIX}`;
  const audience = `${origin}/dashboard/api`;
  let parts: Promise<Parts> | undefined;
  const ready = () => {
    parts ??= createProvider({ origin, issuer, audience, state }).then((built) => {
      built.provider.on("server_error", (_ctx, err) =>
        logger.error("identity provider error", errorFields(err)),
      );
      return built;
    });
    return parts;
  };

  const serve = async (req: IncomingMessage, res: ServerResponse, path: string, target: string) => {
    const built = await ready();
    const match = INTERACTION.exec(path);
    if (!match?.[1]) {
      // Mounted under /oidc: the provider sees the path below the mount point and builds its URLs
      // from `originalUrl` (the Express convention it follows).
      Object.assign(req, { originalUrl: target });
      req.url = target.slice(OIDC_PREFIX.length) || "/";
      built.callback(req, res);
      return;
    }
    try {
      await interaction(built, devUser, req, res, match[1], match[2] ?? "");
    } catch (err) {
      const expired = err instanceof built.errors.SessionNotFound;
      if (!expired) logger.error("sign-in page failed", errorFields(err));
      if (res.headersSent) {
        res.destroy();
        return;
      }
      sendHtml(
        res,
        expired ? 400 : 500,
        expired
          ? errorPage(
              "Sign-in expired",
              "This sign-in took too long or was already used. Start again from the dashboard.",
            )
          : errorPage("Sign-in failed", "Something went wrong. Start again from the dashboard."),
      );
    }
  };

  return {
    issuer,
    clientId: DASHBOARD_CLIENT_ID,
    audience,
    scope: DASHBOARD_SCOPE,
    jwks: { keys: [publicJwk(state.signingKey)] },
    devUser,
    handle(req, res) {
      for (const [name, value] of Object.entries(SECURITY_HEADERS)) res.setHeader(name, value);
      res.setHeader("Cache-Control", "no-store");
      const target = req.url ?? "/";
      const path = target.split("?")[0] ?? "/";
      // The raw target, as the client sent it: a path that only normalises into /oidc is refused.
      if (!(path === OIDC_PREFIX || path.startsWith(`${OIDC_PREFIX}/`)) || UNSAFE_PATH.test(path)) {
        res.statusCode = 400;
        res.setHeader("Content-Type", "application/json");
        res.end(
          JSON.stringify(
            errors
              .invalidPath("dot segments, empty segments and encoded separators are not allowed.")
              .toBody(),
          ),
        );
        return;
      }
      if (path === STYLESHEET_PATH) {
        res.setHeader("Content-Type", "text/css; charset=utf-8");
        res.end(STYLESHEET);
        return;
      }
      serve(req, res, path, target).catch((err: unknown) => {
        logger.error("identity provider failed", errorFields(err));
        if (!res.headersSent)
          sendHtml(res, 500, errorPage("Sign-in failed", "The identity provider could not start."));
        else res.destroy();
      });
    },
  };
}
