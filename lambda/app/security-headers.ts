import type { MiddlewareHandler } from "hono";

/** The spec's response security headers, on every response we send: success, error, 404 alike. */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  "Strict-Transport-Security": "max-age=31536000",
  "Content-Security-Policy": "default-src 'self'",
  "X-Content-Type-Options": "nosniff",
  "X-Frame-Options": "DENY",
};

/** The same, by lower-case name: what a plain header object given to a Response uses. */
const SECURITY_HEADERS_LOWER: Readonly<Record<string, string>> = Object.fromEntries(
  Object.entries(SECURITY_HEADERS).map(([name, value]) => [name.toLowerCase(), value]),
);

/** Responses that carry the security headers from the start (`securedResponse`). */
const secured = new WeakSet<Response>();

export const securityHeaders: MiddlewareHandler = async (c, next) => {
  await next();
  if (secured.has(c.res)) return;
  for (const [name, value] of Object.entries(SECURITY_HEADERS)) c.res.headers.set(name, value);
};

/**
 * A response with `headers` merged in order (lower-case names), then the security headers, which
 * `securityHeaders` then leaves alone. For the proxy's answers: setting them afterwards reads
 * `headers`, which on Node turns the response's plain header object into a `Headers` (about 2% of a
 * proxied call's CPU on the server's main thread). Object.assign, not spreads: on Node 20 those took
 * ~9 µs a call.
 */
export function securedResponse(
  body: BodyInit | null,
  status: number,
  ...headers: (Record<string, string> | undefined)[]
): Response {
  const response = new Response(body, {
    status,
    headers: Object.assign({}, ...headers, SECURITY_HEADERS_LOWER),
  });
  secured.add(response);
  return response;
}
