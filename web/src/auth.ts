import * as oauth from "oauth4webapi";
import type { DashboardConfig } from "./config";
import { signOutUrl } from "./signout";

/**
 * Sign-in with the authorization code flow and PKCE (oauth4webapi), against Cognito in AWS or the
 * local provider. The session lives in sessionStorage: per tab, gone when the tab closes; a new tab
 * signs in again, silently while the provider's own session lasts.
 */

export interface Session {
  accessToken: string;
  idToken: string;
  /** Epoch ms. */
  expiresAt: number;
  email?: string;
  name?: string;
}

interface PendingSignIn {
  state: string;
  codeVerifier: string;
  returnPath: string;
}

const SESSION_KEY = "dmt.session";
const PENDING_KEY = "dmt.signin";
/** Treat a token as expired a little early, so that no request leaves with a token about to lapse. */
const EXPIRY_MARGIN_MS = 30_000;

export const CALLBACK_PATH = "/dashboard/callback";
export const SIGNED_OUT_PATH = "/dashboard/signed-out";

export class Auth {
  private server: Promise<oauth.AuthorizationServer> | undefined;
  private readonly client: oauth.Client;
  private readonly issuer: URL;
  // The local provider speaks plain HTTP on the loopback address; anything else must be HTTPS.
  private readonly options: { [oauth.allowInsecureRequests]?: boolean };

  constructor(private readonly config: DashboardConfig) {
    this.client = { client_id: config.clientId };
    this.issuer = new URL(config.issuer);
    const loopback = ["127.0.0.1", "localhost", "[::1]"].includes(this.issuer.hostname);
    this.options =
      this.issuer.protocol === "http:" && loopback ? { [oauth.allowInsecureRequests]: true } : {};
  }

  private authorizationServer(): Promise<oauth.AuthorizationServer> {
    this.server ??= oauth
      .discoveryRequest(this.issuer, this.options)
      .then((response) => oauth.processDiscoveryResponse(this.issuer, response))
      .catch((err: unknown) => {
        this.server = undefined;
        throw err;
      });
    return this.server;
  }

  private redirectUri(path: string): string {
    return new URL(path, location.origin).href;
  }

  session(): Session | undefined {
    const raw = sessionStorage.getItem(SESSION_KEY);
    if (!raw) return undefined;
    const session = JSON.parse(raw) as Session;
    if (session.expiresAt - EXPIRY_MARGIN_MS <= Date.now()) {
      sessionStorage.removeItem(SESSION_KEY);
      return undefined;
    }
    return session;
  }

  /** Leaves for the provider's sign-in page; comes back at the callback. */
  async signIn(returnPath: string): Promise<void> {
    const as = await this.authorizationServer();
    if (!as.authorization_endpoint) throw new Error("The identity provider has no authorization endpoint.");
    const pending: PendingSignIn = {
      state: oauth.generateRandomState(),
      codeVerifier: oauth.generateRandomCodeVerifier(),
      returnPath,
    };
    sessionStorage.setItem(PENDING_KEY, JSON.stringify(pending));
    const url = new URL(as.authorization_endpoint);
    url.search = new URLSearchParams({
      client_id: this.config.clientId,
      response_type: "code",
      redirect_uri: this.redirectUri(CALLBACK_PATH),
      scope: this.config.scope,
      state: pending.state,
      code_challenge: await oauth.calculatePKCECodeChallenge(pending.codeVerifier),
      code_challenge_method: "S256",
    }).toString();
    location.assign(url.href);
  }

  /** Finishes a sign-in at the callback URL; returns the path the user was on. */
  async completeSignIn(callback: URL): Promise<string> {
    const raw = sessionStorage.getItem(PENDING_KEY);
    sessionStorage.removeItem(PENDING_KEY);
    if (!raw) throw new Error("This sign-in was not started here or was already finished. Sign in again.");
    const pending = JSON.parse(raw) as PendingSignIn;
    const as = await this.authorizationServer();
    const params = oauth.validateAuthResponse(as, this.client, callback, pending.state);
    const response = await oauth.authorizationCodeGrantRequest(
      as,
      this.client,
      oauth.None(),
      params,
      this.redirectUri(CALLBACK_PATH),
      pending.codeVerifier,
      this.options,
    );
    const tokens = await oauth.processAuthorizationCodeResponse(as, this.client, response, {
      requireIdToken: true,
    });
    const claims = oauth.getValidatedIdTokenClaims(tokens);
    const session: Session = {
      accessToken: tokens.access_token,
      idToken: tokens.id_token ?? "",
      expiresAt: Date.now() + (tokens.expires_in ?? 3600) * 1000,
      ...(typeof claims?.email === "string" ? { email: claims.email } : {}),
      ...(typeof claims?.name === "string" ? { name: claims.name } : {}),
    };
    sessionStorage.setItem(SESSION_KEY, JSON.stringify(session));
    return pending.returnPath;
  }

  /** Ends the local session, then the provider's (which comes back to the signed-out page). */
  async signOut(): Promise<void> {
    const session = this.session();
    sessionStorage.removeItem(SESSION_KEY);
    // Cognito's sign-out endpoint comes with the config; other providers publish theirs.
    const as = this.config.logoutEndpoint
      ? undefined
      : await this.authorizationServer().catch(() => undefined);
    const url = signOutUrl({
      config: this.config,
      endSessionEndpoint: as?.end_session_endpoint,
      signedOut: this.redirectUri(SIGNED_OUT_PATH),
      idToken: session?.idToken,
    });
    location.assign(url ?? SIGNED_OUT_PATH);
  }

  /** Forgets the session without leaving the page (the API said the token is no longer good). */
  forget(): void {
    sessionStorage.removeItem(SESSION_KEY);
  }
}
