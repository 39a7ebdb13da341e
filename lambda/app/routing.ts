import type { Handler, Hono } from "hono";
import { errors } from "../core/errors";
import type { AppEnv } from "./env";

export type Method = "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
export type RouteTable = Record<string, Partial<Record<Method, Handler<AppEnv>>>>;

/** Registers a route table; any other method on a known path is a 405 with an Allow header. */
export function mountRoutes(app: Hono<AppEnv>, table: RouteTable): void {
  for (const [path, methods] of Object.entries(table)) {
    const allow = Object.keys(methods) as Method[];
    for (const method of allow) {
      const handler = methods[method];
      if (handler) app.on(method, path, handler);
    }
    app.all(path, (c) => {
      throw errors.methodNotAllowed(c.req.method, allow);
    });
  }
}
