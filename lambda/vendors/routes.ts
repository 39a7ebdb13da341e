import { errors } from "../core/errors";
import type { VendorName, VendorRoute } from "../core/vendor-model";

/** JSON bodies up to 20 MiB: vendors accept inline images and documents of that order. */
export const JSON_BODY_LIMIT = 20 * 1024 * 1024;
/** Audio and image uploads: the vendors' own 25 MB file limit. */
export const UPLOAD_BODY_LIMIT = 25 * 1024 * 1024;

/** `GET /{prefix}/health` and the spec's literal `GET /{prefix}/{prefix}/health`: answered by us. */
export function healthRoutes(vendor: VendorName): VendorRoute[] {
  return ["/health", `/${vendor}/health`].map((path) => ({
    method: "GET",
    path,
    operation: "health",
    kind: "none",
    stream: "never",
    bodyLimit: 0,
    billing: "free",
  }));
}

/**
 * `GET <path>` lists the models, `GET <path>/{model}` describes one (the SDKs' `models.list` and
 * `models.retrieve` / `models.get`): answered by the vendor, free. The lookup comes after a vendor's
 * `<path>/{model}:<method>` routes, whose patterns it would otherwise take.
 */
export function modelRoutes(path: string): VendorRoute[] {
  return [path, `${path}/{model}`].map((p) => ({
    method: "GET",
    path: p,
    operation: "models",
    kind: "none",
    stream: "never",
    bodyLimit: 0,
    billing: "free",
  }));
}

export interface RouteMatch {
  route: VendorRoute;
  /** The vendor path, built only from the route template and the validated model. */
  upstreamPath: string;
  /** The model segment of the path, for routes that name one. */
  model?: string;
}

/** Model ids as the vendors spell them (`gemini-2.5-flash`, `text-embedding-004`). */
const MODEL_SEGMENT = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

interface PatternRoutes {
  pattern: RegExp;
  routes: VendorRoute[];
}

/**
 * Matches request paths (under the vendor prefix) against a vendor's route data: an unknown path is a
 * 404, a known path with another method a 405, a malformed model segment a 400. Nothing else is routable.
 */
export class RouteMatcher {
  private readonly exact = new Map<string, VendorRoute[]>();
  private readonly patterns: PatternRoutes[] = [];

  constructor(routes: readonly VendorRoute[]) {
    for (const route of routes) {
      if (!route.path.includes("{model}")) {
        const list = this.exact.get(route.path) ?? [];
        list.push(route);
        this.exact.set(route.path, list);
        continue;
      }
      // A path ending in its model (a model's lookup) never takes a `model:method` path.
      const segment = route.path.endsWith("{model}") ? "([^:]+)" : "(.+)";
      const source = `^${route.path
        .split("{model}")
        .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"))
        .join(segment)}$`;
      const existing = this.patterns.find((p) => p.pattern.source === source);
      if (existing) existing.routes.push(route);
      else this.patterns.push({ pattern: new RegExp(source), routes: [route] });
    }
  }

  match(method: string, path: string): RouteMatch {
    const exact = this.exact.get(path);
    if (exact) {
      const route = pick(exact, method);
      return { route, upstreamPath: route.upstreamPath ?? route.path };
    }
    for (const { pattern, routes } of this.patterns) {
      const found = pattern.exec(path);
      if (!found) continue;
      const model = found[1] ?? "";
      if (!MODEL_SEGMENT.test(model)) {
        throw errors.invalidPath("the model segment must be a model id (letters, digits, '.', '_', '-').");
      }
      const route = pick(routes, method);
      return { route, model, upstreamPath: (route.upstreamPath ?? route.path).replace("{model}", model) };
    }
    throw errors.notFound();
  }
}

function pick(routes: VendorRoute[], method: string): VendorRoute {
  const route = routes.find((r) => r.method === method);
  if (!route) {
    throw errors.methodNotAllowed(
      method,
      routes.map((r) => r.method),
    );
  }
  return route;
}
