import type { DashboardConfig } from "./config";

export interface SignOutOptions {
  config: Pick<DashboardConfig, "clientId" | "logoutEndpoint">;
  /** The discovery document's `end_session_endpoint`, if the provider publishes one. */
  endSessionEndpoint?: string | undefined;
  /** The absolute URL of the signed-out page, where the provider sends the browser back. */
  signedOut: string;
  idToken?: string | undefined;
}

/**
 * Where sign-out sends the browser to end the provider's session too, or undefined when the provider
 * offers no sign-out. Cognito (`config.logoutEndpoint`) takes `client_id` and `logout_uri`, which must
 * be one of the app client's registered sign-out URLs; an OpenID provider with an
 * `end_session_endpoint` (the local one) takes RP-initiated logout's parameters.
 */
export function signOutUrl(options: SignOutOptions): string | undefined {
  const { config, signedOut } = options;
  let url: URL;
  if (config.logoutEndpoint) {
    url = new URL(config.logoutEndpoint);
    url.search = new URLSearchParams({ client_id: config.clientId, logout_uri: signedOut }).toString();
  } else if (options.endSessionEndpoint) {
    url = new URL(options.endSessionEndpoint);
    url.search = new URLSearchParams({
      client_id: config.clientId,
      post_logout_redirect_uri: signedOut,
      ...(options.idToken ? { id_token_hint: options.idToken } : {}),
    }).toString();
  } else {
    return undefined;
  }
  return url.href;
}
