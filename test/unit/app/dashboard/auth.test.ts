import {
  createLocalJWKSet,
  exportJWK,
  generateKeyPair,
  type JWK,
  type JWTPayload,
  SignJWT,
  UnsecuredJWT,
} from "jose";
import { beforeAll, describe, expect, it } from "vitest";
import { type DashboardUser, requireUser, tokenVerifier } from "../../../../lambda/app/dashboard/auth";
import { appShell } from "../../../../lambda/app/shell";
import { silentLogger } from "../../../../lambda/core/logger";

const ISSUER = "https://idp.example.test/pool";
const AUDIENCE = "https://dashboard.example.test/dashboard/api";
const CLIENT = "dashboard-client";
const NOW = Date.UTC(2030, 0, 1);
const KID = "key-1";

let signingKey: CryptoKey;
let impostorKey: CryptoKey;
let app: ReturnType<typeof appShell>;

beforeAll(async () => {
  const pair = await generateKeyPair("RS256", { extractable: true });
  signingKey = pair.privateKey;
  impostorKey = (await generateKeyPair("RS256")).privateKey;
  const publicJwk: JWK = { ...(await exportJWK(pair.publicKey)), kid: KID, alg: "RS256", use: "sig" };
  const verify = tokenVerifier({
    issuer: ISSUER,
    audience: AUDIENCE,
    clientId: CLIENT,
    keys: createLocalJWKSet({ keys: [publicJwk] }),
    clock: () => NOW,
  });
  app = appShell(silentLogger);
  app.use("/me", requireUser(verify));
  app.get("/me", (c) => c.json(c.get("dashboardUser")));
});

const seconds = (ms: number) => Math.floor(ms / 1000);

function token(
  claims: JWTPayload = {},
  options: { key?: CryptoKey; kid?: string; expiresAt?: number; issuer?: string; audience?: string } = {},
): Promise<string> {
  return new SignJWT({ client_id: CLIENT, scope: "dashboard", ...claims })
    .setProtectedHeader({ alg: "RS256", typ: "at+jwt", kid: options.kid ?? KID })
    .setSubject("user-a")
    .setIssuer(options.issuer ?? ISSUER)
    .setAudience(options.audience ?? AUDIENCE)
    .setIssuedAt(seconds(NOW) - 60)
    .setExpirationTime(seconds(options.expiresAt ?? NOW + 3_600_000))
    .sign(options.key ?? signingKey);
}

async function call(authorization?: string) {
  const res = await app.request("/me", {
    headers: authorization === undefined ? {} : { Authorization: authorization },
  });
  return { status: res.status, body: (await res.json()) as unknown, headers: res.headers };
}

async function refused(authorization: string | undefined, code: string, message: RegExp) {
  const res = await call(authorization);
  expect(res.status).toBe(401);
  expect(res.body).toEqual({
    error: { type: "authentication_error", code, message: expect.stringMatching(message) },
  });
  expect(res.headers.get("www-authenticate")).toMatch(/^Bearer realm="dmt-dashboard"/);
  expect(res.headers.get("content-security-policy")).toBe("default-src 'self'");
}

describe("dashboard access tokens", () => {
  it("admits a valid access token and names its user", async () => {
    const res = await call(`Bearer ${await token()}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ userId: "user-a", operator: false } satisfies DashboardUser);
  });

  it("reads operators from the groups claim", async () => {
    const res = await call(`Bearer ${await token({ "cognito:groups": ["operators"] })}`);
    expect(res.body).toEqual({ userId: "user-a", operator: true });
  });

  it("refuses a missing or malformed Authorization header", async () => {
    await refused(undefined, "missing_token", /Sign in/);
    await refused("", "missing_token", /Sign in/);
    await refused(`Basic ${Buffer.from("a:b").toString("base64")}`, "invalid_token", /Bearer/);
    await refused(`Bearer ${await token()}, Bearer ${await token()}`, "invalid_token", /exactly one/);
    await refused("Bearer not-a-jwt", "invalid_token", /invalid/);
  });

  it("refuses a service key with a message that points to the right place", async () => {
    await refused(
      "Bearer dmt_abcdefghijklmnop_ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopq",
      "invalid_token",
      /API keys are not accepted/,
    );
  });

  it("refuses an expired token", async () => {
    await refused(`Bearer ${await token({}, { expiresAt: NOW - 1000 })}`, "invalid_token", /expired/);
  });

  it("refuses a token signed by another key under the provider's key id (forged)", async () => {
    await refused(`Bearer ${await token({}, { key: impostorKey })}`, "invalid_token", /invalid/);
  });

  it("refuses a token whose key id the provider does not have", async () => {
    await refused(`Bearer ${await token({}, { kid: "unknown" })}`, "invalid_token", /invalid/);
  });

  it("refuses a tampered payload", async () => {
    const [header, , signature] = (await token()).split(".");
    const payload = Buffer.from(
      JSON.stringify({
        sub: "user-b",
        iss: ISSUER,
        aud: AUDIENCE,
        client_id: CLIENT,
        exp: seconds(NOW) + 600,
      }),
    ).toString("base64url");
    await refused(`Bearer ${header}.${payload}.${signature}`, "invalid_token", /invalid/);
  });

  it("refuses an unsigned token (alg none)", async () => {
    const unsigned = new UnsecuredJWT({ client_id: CLIENT })
      .setSubject("user-a")
      .setIssuer(ISSUER)
      .setAudience(AUDIENCE)
      .setExpirationTime(seconds(NOW) + 600)
      .encode();
    await refused(`Bearer ${unsigned}`, "invalid_token", /invalid/);
  });

  it("refuses a token signed with a shared secret (alg HS256)", async () => {
    const hs = await new SignJWT({ client_id: CLIENT })
      .setProtectedHeader({ alg: "HS256", kid: KID })
      .setSubject("user-a")
      .setIssuer(ISSUER)
      .setAudience(AUDIENCE)
      .setExpirationTime(seconds(NOW) + 600)
      .sign(new TextEncoder().encode("a-shared-secret-of-at-least-32-bytes!"));
    await refused(`Bearer ${hs}`, "invalid_token", /invalid/);
  });

  it("refuses a token for another audience (an ID token, another API)", async () => {
    await refused(`Bearer ${await token({}, { audience: CLIENT })}`, "invalid_token", /invalid/);
    await refused(
      `Bearer ${await token({}, { audience: "https://other.example.test/api" })}`,
      "invalid_token",
      /invalid/,
    );
  });

  it("refuses a token of another issuer or another client", async () => {
    await refused(
      `Bearer ${await token({}, { issuer: "https://evil.example.test" })}`,
      "invalid_token",
      /invalid/,
    );
    await refused(`Bearer ${await token({ client_id: "someone-else" })}`, "invalid_token", /another client/);
  });

  it("refuses a token without a subject", async () => {
    const noSub = await new SignJWT({ client_id: CLIENT })
      .setProtectedHeader({ alg: "RS256", kid: KID })
      .setIssuer(ISSUER)
      .setAudience(AUDIENCE)
      .setExpirationTime(seconds(NOW) + 600)
      .sign(signingKey);
    await refused(`Bearer ${noSub}`, "invalid_token", /invalid/);
  });

  it("needs something to bind tokens to this API", () => {
    expect(() => tokenVerifier({ issuer: ISSUER, keys: createLocalJWKSet({ keys: [] }) })).toThrow(
      /audience or a client id/,
    );
  });
});
