import { createHash, randomBytes } from "node:crypto";
import { decodeJwt } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SECURITY_HEADERS } from "../../lambda/app/security-headers";
import { startTestHost, type TestHost } from "../support/host";
import { jsonOf, rawRequest } from "../support/http";

/**
 * Sign-in through the real local OpenID provider, over plain HTTP as a browser would drive it
 * (authorization code + PKCE, the login form, the token endpoint, RP-initiated logout), and the SPA's
 * static files. The browser test (test/browser) drives the same flow through the SPA itself.
 */

let stack: TestHost;
beforeAll(async () => {
  stack = await startTestHost();
});
afterAll(() => stack.stop());

/** A user agent: follows nothing by itself, keeps cookies. */
class Agent {
  private readonly cookies = new Map<string, string>();

  async go(url: string, init: RequestInit = {}): Promise<Response> {
    const cookie = [...this.cookies].map(([k, v]) => `${k}=${v}`).join("; ");
    const res = await fetch(new URL(url, stack.url), {
      ...init,
      redirect: "manual",
      headers: { ...(init.headers as Record<string, string>), ...(cookie ? { cookie } : {}) },
    });
    for (const setCookie of res.headers.getSetCookie()) {
      const pair = setCookie.split(";")[0] ?? "";
      const eq = pair.indexOf("=");
      this.cookies.set(pair.slice(0, eq), pair.slice(eq + 1));
    }
    return res;
  }

  postForm(url: string, form: Record<string, string>): Promise<Response> {
    return this.go(url, {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams(form).toString(),
    });
  }

  /** Follows redirects until one leaves for `stop` (returned unvisited) or a page answers. */
  async follow(res: Response, stop: string): Promise<{ res: Response; url: string }> {
    let current = res;
    let url = "";
    while (current.status >= 300 && current.status < 400) {
      url = new URL(current.headers.get("location") ?? "", stack.url).href;
      if (url.startsWith(stop)) return { res: current, url };
      current = await this.go(url);
    }
    return { res: current, url };
  }
}

const callback = () => `${stack.url}/dashboard/callback`;

interface Discovery {
  authorization_endpoint: string;
  token_endpoint: string;
  end_session_endpoint: string;
  jwks_uri: string;
  issuer: string;
}

async function discovery(): Promise<Discovery> {
  return (await (await fetch(`${stack.url}/oidc/.well-known/openid-configuration`)).json()) as Discovery;
}

async function startSignIn(agent: Agent) {
  const d = await discovery();
  const verifier = randomBytes(32).toString("base64url");
  const state = randomBytes(16).toString("base64url");
  const query = new URLSearchParams({
    client_id: "dmt-dashboard",
    response_type: "code",
    scope: "openid email profile dashboard",
    redirect_uri: callback(),
    state,
    code_challenge: createHash("sha256").update(verifier).digest("base64url"),
    code_challenge_method: "S256",
  });
  const res = await agent.go(`${d.authorization_endpoint}?${query}`);
  return { d, verifier, state, ...(await agent.follow(res, callback())) };
}

async function signIn(agent: Agent) {
  const started = await startSignIn(agent);
  expect(started.res.status).toBe(200);
  const page = await started.res.text();
  const action = /action="([^"]+)"/.exec(page)?.[1] ?? "";
  const submitted = await agent.postForm(action, {
    email: stack.dashboard.email,
    password: stack.dashboard.password,
  });
  const back = await agent.follow(submitted, callback());
  const params = new URL(back.url).searchParams;
  expect(params.get("state")).toBe(started.state);
  const tokenRes = await fetch(started.d.token_endpoint, {
    method: "POST",
    headers: { "Content-Type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({
      grant_type: "authorization_code",
      code: params.get("code") ?? "",
      redirect_uri: callback(),
      code_verifier: started.verifier,
      client_id: "dmt-dashboard",
    }).toString(),
  });
  expect(tokenRes.status).toBe(200);
  return { tokens: (await tokenRes.json()) as { access_token: string; id_token: string } };
}

describe("the local OpenID provider", () => {
  it("publishes its configuration on the server's own origin", async () => {
    const d = await discovery();
    expect(d.issuer).toBe(`${stack.url}/oidc`);
    expect(d.token_endpoint).toBe(`${stack.url}/oidc/token`);
    expect(d.end_session_endpoint).toBe(`${stack.url}/oidc/session/end`);
  });

  it("signs the development user in with code + PKCE and issues a JWT access token for the dashboard API", async () => {
    const agent = new Agent();
    const { tokens } = await signIn(agent);
    const claims = decodeJwt(tokens.access_token);
    expect(claims).toMatchObject({
      iss: `${stack.url}/oidc`,
      aud: `${stack.url}/dashboard/api`,
      client_id: "dmt-dashboard",
      "cognito:groups": ["operators"],
    });
    expect(decodeJwt(tokens.id_token)).toMatchObject({ email: stack.dashboard.email });
    const me = await fetch(`${stack.url}/dashboard/api/me`, {
      headers: { Authorization: `Bearer ${tokens.access_token}` },
    });
    expect(me.status).toBe(200);
    expect(await me.json()).toMatchObject({ user: { id: claims.sub, operator: true } });
  });

  it("refuses a wrong password on its login page, which holds no inline script or style", async () => {
    const agent = new Agent();
    const started = await startSignIn(agent);
    expect(started.res.headers.get("content-security-policy")).toBe(
      SECURITY_HEADERS["Content-Security-Policy"],
    );
    const page = await started.res.text();
    expect(page).not.toMatch(/<script|<style|\sstyle=/i);
    const action = /action="([^"]+)"/.exec(page)?.[1] ?? "";
    const wrong = await agent.postForm(action, { email: stack.dashboard.email, password: "wrong" });
    expect(wrong.status).toBe(401);
    expect(await wrong.text()).toContain("Wrong email or password.");
  });

  it("refuses paths that only normalise into /oidc", async () => {
    for (const target of ["/api/../oidc/jwks", "/oidc/%2e%2e/oidc/jwks", "/oidc//jwks"]) {
      const res = await rawRequest(
        stack.port,
        `GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`,
      );
      expect(res.status, target).toBe(400);
      expect(jsonOf(res)).toMatchObject({ error: { code: "invalid_path" } });
    }
  });

  it("refuses an authorization request without PKCE", async () => {
    const d = await discovery();
    const query = new URLSearchParams({
      client_id: "dmt-dashboard",
      response_type: "code",
      scope: "openid",
      redirect_uri: callback(),
      state: "s",
    });
    const res = await new Agent().go(`${d.authorization_endpoint}?${query}`);
    const location = new URL(res.headers.get("location") ?? "", stack.url);
    expect(location.searchParams.get("error")).toBe("invalid_request");
  });

  it("ends its session on sign-out, so the next sign-in asks for the password again", async () => {
    const agent = new Agent();
    const { tokens } = await signIn(agent);

    // Signed in: a new authorization goes straight back to the dashboard.
    const silent = await startSignIn(agent);
    expect(silent.url.startsWith(callback())).toBe(true);

    const d = await discovery();
    const logout = await agent.go(
      `${d.end_session_endpoint}?${new URLSearchParams({
        client_id: "dmt-dashboard",
        id_token_hint: tokens.id_token,
        post_logout_redirect_uri: `${stack.url}/dashboard/signed-out`,
      })}`,
    );
    expect(logout.status).toBe(200);
    const page = await logout.text();
    expect(page).not.toMatch(/<script|<style|\sstyle=/i);
    const action = /<form[^>]*action="([^"]+)"/.exec(page)?.[1] ?? "";
    const xsrf = /name="xsrf" value="([^"]+)"/.exec(page)?.[1] ?? "";
    const confirmed = await agent.postForm(action, { xsrf, logout: "yes" });
    const done = await agent.follow(confirmed, `${stack.url}/dashboard/signed-out`);
    expect(done.url).toBe(`${stack.url}/dashboard/signed-out`);

    const after = await startSignIn(agent);
    expect(after.res.status).toBe(200);
    expect(await after.res.text()).toContain('name="password"');
  });
});

describe("the dashboard SPA", () => {
  it("serves its page for every dashboard path, with the security headers and no inline code", async () => {
    for (const path of ["/dashboard/", "/dashboard/keys", "/dashboard/callback", "/dashboard/signed-out"]) {
      const res = await fetch(`${stack.url}${path}`);
      expect(res.status, path).toBe(200);
      for (const [name, value] of Object.entries(SECURITY_HEADERS)) expect(res.headers.get(name)).toBe(value);
      const html = await res.text();
      expect(html).toContain('<script type="module" src="/dashboard/assets/app.js"></script>');
      expect(html.match(/<script/g)).toHaveLength(1);
      expect(html).not.toMatch(/<style|\sstyle=|\son[a-z]+=/i);
    }
    const bare = await fetch(`${stack.url}/dashboard`, { redirect: "manual" });
    expect(bare.status).toBe(308);
    expect(bare.headers.get("location")).toBe("/dashboard/");
  });

  it("serves the bundle and a configuration naming the provider", async () => {
    const js = await fetch(`${stack.url}/dashboard/assets/app.js`);
    expect(js.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    expect((await js.text()).length).toBeGreaterThan(1000);
    const css = await fetch(`${stack.url}/dashboard/assets/app.css`);
    expect(css.headers.get("content-type")).toBe("text/css; charset=utf-8");
    const config = await fetch(`${stack.url}/dashboard/config.json`);
    expect(await config.json()).toEqual({
      issuer: `${stack.url}/oidc`,
      clientId: "dmt-dashboard",
      scope: "openid email profile dashboard",
      apiBase: "/dashboard/api",
    });
    const missing = await fetch(`${stack.url}/dashboard/assets/nope.js`);
    expect(missing.status).toBe(404);
    expect(await missing.json()).toMatchObject({ error: { code: "not_found" } });
  });

  it("moves a page opened under another host name to the issuer's origin", async () => {
    const res = await fetch(`${stack.url.replace("127.0.0.1", "localhost")}/dashboard/keys?x=1`, {
      redirect: "manual",
    });
    expect(res.status).toBe(307);
    expect(res.headers.get("location")).toBe(`${stack.url}/dashboard/keys?x=1`);
  });
});
