import { readFileSync } from "node:fs";
import { join } from "node:path";
import { importJWK, type JWK, SignJWT } from "jose";

/**
 * An access token for the dashboard API of the host serving `url` from `dataDir`, signed with the
 * bundled OpenID provider's key, as a sign-in would get it: for tests that call the API directly.
 */
export async function dashboardToken(dataDir: string, url: string, userId: string): Promise<string> {
  const state = JSON.parse(readFileSync(join(dataDir, "oidc.json"), "utf8")) as { signingKey: JWK };
  const alg = state.signingKey.alg ?? "";
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ client_id: "dmt-dashboard", scope: "dashboard" })
    .setProtectedHeader({ alg, typ: "at+jwt", kid: state.signingKey.kid ?? "" })
    .setSubject(userId)
    .setIssuer(`${url}/oidc`)
    .setAudience(`${url}/dashboard/api`)
    .setIssuedAt(now - 5)
    .setExpirationTime(now + 3600)
    .sign(await importJWK(state.signingKey, alg));
}
