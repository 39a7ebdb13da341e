/** `/dashboard/config.json`: where the SPA signs in and which API it calls (written by CDK in AWS). */
export interface DashboardConfig {
  /** The OpenID provider's issuer: Cognito's user pool, or the local provider at `<origin>/oidc`. */
  issuer: string;
  /** The SPA's public OAuth client (no secret: authorization code with PKCE). */
  clientId: string;
  scope: string;
  /** Base URL of the dashboard API, e.g. `/dashboard/api`. */
  apiBase: string;
  /**
   * Cognito's sign-out endpoint (`https://<domain>/logout`), which its discovery document does not
   * publish. Absent: sign-out uses the discovery document's `end_session_endpoint` (the local provider).
   */
  logoutEndpoint?: string;
}
