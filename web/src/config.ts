/** `/dashboard/config.json`: where the SPA signs in and which API it calls (written by CDK in AWS). */
export interface DashboardConfig {
  /** The OpenID provider's issuer: Cognito's user pool, or the local provider at `<origin>/oidc`. */
  issuer: string;
  /** The SPA's public OAuth client (no secret: authorization code with PKCE). */
  clientId: string;
  scope: string;
  /** Base URL of the dashboard API, e.g. `/dashboard/api`. */
  apiBase: string;
}
