import { HTTPException } from "hono/http-exception";
import { describe, expect, it } from "vitest";
import { mountRoutes } from "../../../lambda/app/routing";
import { appShell } from "../../../lambda/app/shell";
import { jsonLogger } from "../../../lambda/core/logger";
import { errorBody, expectSecurityHeaders } from "../../support/http";

function app() {
  const lines: string[] = [];
  const shell = appShell(jsonLogger("debug", (line) => lines.push(line)));
  mountRoutes(shell, {
    "/ok": { GET: (c) => c.json({ ok: true }), POST: (c) => c.json({ posted: true }) },
    "/boom": {
      GET: () => {
        throw new Error("database password is hunter2");
      },
    },
    "/teapot": {
      GET: () => {
        throw new HTTPException(418, { message: "short and stout" });
      },
    },
  });
  return { shell, lines };
}

describe("appShell", () => {
  it("puts the security headers on a success", async () => {
    const res = await app().shell.request("/ok");
    expect(res.status).toBe(200);
    expectSecurityHeaders(res.headers);
  });

  it("answers an unknown path with 404 in the error shape", async () => {
    const res = await app().shell.request("/nope");
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual(
      errorBody("not_found_error", "not_found", "The requested endpoint does not exist."),
    );
    expectSecurityHeaders(res.headers);
  });

  it("answers another method on a known path with 405 and Allow", async () => {
    const res = await app().shell.request("/ok", { method: "DELETE" });
    expect(res.status).toBe(405);
    expect(res.headers.get("Allow")).toBe("GET, POST");
    expect(await res.json()).toEqual(
      errorBody(
        "method_not_allowed_error",
        "method_not_allowed",
        "Method DELETE is not allowed here; use GET, POST.",
      ),
    );
    expectSecurityHeaders(res.headers);
  });

  it("turns an unexpected failure into a bare 500: no message, no stack; the log has the detail", async () => {
    const { shell, lines } = app();
    const res = await shell.request("/boom");
    expect(res.status).toBe(500);
    const body = await res.text();
    expect(JSON.parse(body)).toEqual(errorBody("api_error", "internal_error", "An internal error occurred."));
    expect(body).not.toContain("hunter2");
    expect(body).not.toContain("at ");
    expectSecurityHeaders(res.headers);
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0] ?? "")).toMatchObject({
      level: "error",
      message: "unhandled error",
      path: "/boom",
    });
  });

  it("renders a framework HTTPException under 500 in the error shape", async () => {
    const res = await app().shell.request("/teapot");
    expect(res.status).toBe(418);
    expect(await res.json()).toEqual(
      errorBody("invalid_request_error", "invalid_request", "short and stout"),
    );
    expectSecurityHeaders(res.headers);
  });

  // Hosts normalise the URL before Hono sees it; the check reads the raw target from the host's object.
  it.each([
    ["the Node request", { incoming: { url: "/ok/%2e%2e/ok" } }],
    ["the Lambda event", { event: { rawPath: "/ok/../ok" } }],
  ])("refuses a dot segment found in %s", async (_case, env) => {
    const res = await app().shell.request("/ok", {}, env);
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual(
      errorBody(
        "invalid_request_error",
        "invalid_path",
        "Invalid request path: dot segments ('.' or '..') are not allowed.",
      ),
    );
    expectSecurityHeaders(res.headers);
  });

  it("reads the path of an absolute-form target after its authority", async () => {
    const res = await app().shell.request(
      "/ok",
      {},
      { incoming: { url: "http://127.0.0.1:8787/ok?a=../b" } },
    );
    expect(res.status).toBe(200);
  });
});
