import { describe, expect, it } from "vitest";
import { signOutUrl } from "../../../../web/src/signout";

/** Where the SPA's sign-out sends the browser (web/src/signout.ts): Cognito's /logout, or RP-initiated logout. */

const signedOut = "https://d111.cloudfront.net/dashboard/signed-out";

describe("sign-out URL", () => {
  it("uses Cognito's /logout with the client id and a registered logout URL", () => {
    const url = new URL(
      signOutUrl({
        config: {
          clientId: "4abc",
          logoutEndpoint: "https://dmt-123.auth.eu-west-1.amazoncognito.com/logout",
        },
        // Cognito publishes none; a stray one must not win over the configured endpoint.
        endSessionEndpoint: "https://elsewhere.example/end",
        signedOut,
        idToken: "eyJ.id.token",
      }) ?? "",
    );
    expect(url.origin + url.pathname).toBe("https://dmt-123.auth.eu-west-1.amazoncognito.com/logout");
    expect(Object.fromEntries(url.searchParams)).toEqual({ client_id: "4abc", logout_uri: signedOut });
  });

  it("uses the discovery document's end_session_endpoint otherwise, with the ID token as a hint", () => {
    const url = new URL(
      signOutUrl({
        config: { clientId: "dmt-dashboard" },
        endSessionEndpoint: "http://127.0.0.1:8787/oidc/session/end",
        signedOut: "http://127.0.0.1:8787/dashboard/signed-out",
        idToken: "eyJ.id.token",
      }) ?? "",
    );
    expect(url.origin + url.pathname).toBe("http://127.0.0.1:8787/oidc/session/end");
    expect(Object.fromEntries(url.searchParams)).toEqual({
      client_id: "dmt-dashboard",
      post_logout_redirect_uri: "http://127.0.0.1:8787/dashboard/signed-out",
      id_token_hint: "eyJ.id.token",
    });
  });

  it("leaves the hint out without an ID token, and answers undefined when the provider has no sign-out", () => {
    const url = new URL(
      signOutUrl({ config: { clientId: "c" }, endSessionEndpoint: "https://idp.example/end", signedOut }) ??
        "",
    );
    expect(url.searchParams.has("id_token_hint")).toBe(false);
    expect(signOutUrl({ config: { clientId: "c" }, signedOut })).toBeUndefined();
  });
});
