import type { Hono } from "hono";
import type { AppEnv } from "../lambda/app/env";
import { appShell } from "../lambda/app/shell";
import { errors } from "../lambda/core/errors";
import type { Logger } from "../lambda/core/logger";
import type { WebFiles } from "./build";
import type { DashboardConfig } from "./src/config";

/**
 * Serves the dashboard SPA on the local server (CloudFront serves the same files in AWS):
 * `/dashboard/assets/*` and `/dashboard/config.json`, and `index.html` for every other page path
 * (the SPA routes with the History API).
 */
export interface WebAppOptions {
  /** The dashboard's canonical origin: the identity provider's issuer lives on it. */
  origin: string;
  config: DashboardConfig;
  files: () => Promise<WebFiles>;
  logger: Logger;
}

const TYPES: Record<string, string> = {
  html: "text/html; charset=utf-8",
  js: "text/javascript; charset=utf-8",
  css: "text/css; charset=utf-8",
  map: "application/json",
  svg: "image/svg+xml",
};

export function createWebApp(options: WebAppOptions): Hono<AppEnv> {
  const app = appShell(options.logger);
  const origin = new URL(options.origin);

  const serve = async (path: string) => {
    const body = (await options.files()).get(path);
    if (!body) throw errors.notFound();
    const type = TYPES[path.slice(path.lastIndexOf(".") + 1)] ?? "application/octet-stream";
    // Built in this process: never a SharedArrayBuffer.
    return new Response(body as Uint8Array<ArrayBuffer>, {
      headers: { "Content-Type": type, "Cache-Control": "no-cache" },
    });
  };

  app.get("/dashboard", (c) => c.redirect("/dashboard/", 308));
  app.get("/dashboard/config.json", (c) => {
    c.header("Cache-Control", "no-cache");
    return c.json(options.config);
  });
  app.get("/dashboard/assets/:file", (c) => serve(`assets/${c.req.param("file")}`));
  app.get("/dashboard/*", async (c) => {
    // Sign-in only works on the issuer's origin (the page may call only its own origin), so a page
    // opened through another name for this host (localhost for 127.0.0.1) moves there first.
    const url = new URL(c.req.url);
    if (url.host !== origin.host) return c.redirect(`${origin.origin}${url.pathname}${url.search}`, 307);
    return serve("index.html");
  });
  return app;
}
