/**
 * The bad-input fuzzer's request generator (fast-check) and a raw HTTP client that sends whatever it
 * generates, byte for byte: any method token, request target, header bytes and body.
 */
import { connect } from "node:net";
import fc from "fast-check";
import { VENDOR_NAMES } from "../../lambda/core/vendor-model";
import { VENDOR_DEFINITIONS } from "../../lambda/vendors";

export interface FuzzCredentials {
  /** A key whose project has credits, one without, and a dashboard access token. */
  paid: string;
  broke: string;
  dashboardToken: string;
  /** The dashboard user's project, so project routes get past the membership check. */
  dashboardProject: string;
  /** A vendor key, sent as the second half of a dual key. */
  dualVendorKey: string;
}

export interface FuzzRequest {
  method: string;
  /** The request target as sent (path and query). */
  target: string;
  headers: [string, string][];
  body: Buffer | undefined;
}

const METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "FOO", "get"];

/** A route of one of the apps: its path template and the method it takes. */
type Route = [method: string, path: string];

const PROXY_ROUTES: Route[] = VENDOR_NAMES.flatMap((vendor) =>
  VENDOR_DEFINITIONS[vendor].routes.map((r): Route => [r.method, `/${vendor}${r.path}`]),
);
const DATA_ROUTES: Route[] = [
  ["GET", "/api/v1/status"],
  ["POST", "/api/v1/exports"],
  ["POST", "/api/v1/data"],
  ["GET", "/api/v1/data/{id}"],
];
const PROJECT_ROUTES: Route[] = [
  ["GET", "keys"],
  ["POST", "keys"],
  ["POST", "keys/{id}/revoke"],
  ["GET", "credits"],
  ["GET", "credits/ledger"],
  ["POST", "credits/grants"],
  ["GET", "vendor-keys"],
  ["PUT", "vendor-keys/{vendor}"],
  ["DELETE", "vendor-keys/{vendor}"],
  ["GET", "interactions"],
  ["GET", "interactions/{id}"],
  ["GET", "usage"],
  ["GET", "export-destination"],
  ["PUT", "export-destination"],
  ["DELETE", "export-destination"],
  ["PUT", "tier"],
  ["POST", "exports"],
];
const DASHBOARD_ROUTES: Route[] = [
  ["GET", "/dashboard/api/me"],
  ...PROJECT_ROUTES.map(([method, path]): Route => [method, `/dashboard/api/projects/{project}/${path}`]),
  ["GET", "/dashboard"],
  ["GET", "/oidc/.well-known/openid-configuration"],
  ["POST", "/oidc/token"],
  ["GET", "/oidc/auth"],
];
const SEGMENTS = [
  "v1",
  "v1beta",
  "chat",
  "completions",
  "models",
  "messages",
  "health",
  "api",
  "projects",
  "..",
  ".",
  "%2e%2e",
  "%2F",
  "%00",
  "",
  "\u00e9t\u00e9",
  "a".repeat(300),
  "gemini-2.5-flash:generateContent",
  "x:streamGenerateContent",
];
const MODELS = [
  "gpt-4o-mini",
  "llama-3.1-8b-instant",
  "claude-haiku-4-5",
  "gemini-2.5-flash",
  "no-such-model",
  "a/b",
  "a%2Fb",
  "..",
  "",
  "x".repeat(1000),
];

/** Percent-encodes the UTF-8 bytes of any text (lone surrogates too, which encodeURIComponent refuses). */
function percentEncoded(text: string): string {
  let out = "";
  for (const byte of Buffer.from(text, "utf8")) {
    const c = String.fromCharCode(byte);
    out += /[A-Za-z0-9._~-]/.test(c) ? c : `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}

/** A text of any characters, control characters and lone surrogates included. */
const anyText = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: "binary", maxLength: 40 }),
  fc.constantFrom("", " ", "\t", "\u0000", "\r\n", "\ud800", "%", "\u202e", "'; DROP TABLE x; --"),
  fc.nat({ max: 20_000 }).map((n) => "z".repeat(n)),
);

function fill(template: string, credentials: FuzzCredentials): fc.Arbitrary<string> {
  return fc
    .record({
      model: fc.constantFrom(...MODELS),
      id: fc.oneof(fc.uuid(), anyText),
      vendor: fc.constantFrom(...VENDOR_NAMES, "nope"),
      project: fc.constantFrom(credentials.dashboardProject, "someone-else", "..", "%2F"),
    })
    .map((v) =>
      template
        .replace("{model}", percentEncoded(v.model).replace(/%3A/gi, ":"))
        .replace("{id}", percentEncoded(v.id))
        .replace("{vendor}", v.vendor)
        .replace("{project}", v.project),
    );
}

/** A known route (mostly with its own method) or a path made of route-like and random segments. */
function routeOf(
  credentials: FuzzCredentials,
): fc.Arbitrary<{ method: string; path: string; audience: Audience }> {
  const known = (routes: Route[], audience: Audience) =>
    fc
      .tuple(
        fc.constantFrom(...routes),
        fc.oneof({ weight: 4, arbitrary: fc.constant(undefined) }, fc.constantFrom(...METHODS)),
      )
      .chain(([[method, template], other]) =>
        fill(template, credentials).map((path) => ({ method: other ?? method, path, audience })),
      );
  return fc.oneof(
    { weight: 6, arbitrary: known(PROXY_ROUTES, "service") },
    { weight: 2, arbitrary: known(DATA_ROUTES, "service") },
    { weight: 3, arbitrary: known(DASHBOARD_ROUTES, "dashboard") },
    {
      weight: 1,
      arbitrary: fc
        .tuple(
          fc.constantFrom(...METHODS),
          fc.constantFrom("/groq", "/openai", "/anthropic", "/gemini", "/api", "/dashboard/api", "", "/x"),
          fc.array(fc.oneof(fc.constantFrom(...SEGMENTS), anyText.map(percentEncoded)), { maxLength: 6 }),
        )
        .map(([method, prefix, segments]) => ({
          method,
          path: `${prefix}/${segments.join("/")}`,
          audience: "service" as const,
        })),
    },
  );
}

const QUERY_KEYS = ["alt", "key", "api_key", "stream", "limit", "cursor", "$alt", "x", ""];

function queryOf(credentials: FuzzCredentials): fc.Arbitrary<string> {
  const value = fc.oneof(
    fc.constantFrom("sse", "json", "true", "-1", "1e400", credentials.paid),
    anyText.map(percentEncoded),
  );
  return fc.oneof(
    { weight: 4, arbitrary: fc.constant("") },
    fc
      .array(fc.tuple(fc.oneof(fc.constantFrom(...QUERY_KEYS), anyText.map(percentEncoded)), value), {
        maxLength: 4,
      })
      .map((pairs) => (pairs.length === 0 ? "" : `?${pairs.map(([k, v]) => `${k}=${v}`).join("&")}`)),
    fc.constantFrom("?%zz", "?&&==&", "?alt", `?key=${credentials.paid}&key=x`),
  );
}

type Audience = "service" | "dashboard";

/** Mostly the credential the route takes (a service key, or a dashboard token), else any of many. */
function credentialHeaders(
  credentials: FuzzCredentials,
  audience: Audience,
): fc.Arbitrary<[string, string][]> {
  const { paid, dashboardToken } = credentials;
  const right: [string, string][] = [
    ["Authorization", `Bearer ${audience === "service" ? paid : dashboardToken}`],
  ];
  return fc.oneof({ weight: 3, arbitrary: fc.constant(right) }, anyCredential(credentials));
}

function anyCredential(credentials: FuzzCredentials): fc.Arbitrary<[string, string][]> {
  const { paid, broke, dashboardToken, dualVendorKey } = credentials;
  return fc.constantFrom<[string, string][]>(
    [],
    [["Authorization", `Bearer ${paid}`]],
    [["Authorization", `Bearer ${paid}`]],
    [["Authorization", `Bearer ${paid}`]],
    [["Authorization", `Bearer ${broke}`]],
    [["x-api-key", paid]],
    [["x-goog-api-key", paid]],
    [["Authorization", `Bearer ${paid};${dualVendorKey}`]],
    [["Authorization", `Bearer ${paid};`]],
    [["Authorization", `Bearer ;${dualVendorKey}`]],
    [["Authorization", `Bearer ${dashboardToken}`]],
    [["Authorization", `Bearer ${dashboardToken}`]],
    [["Authorization", `Bearer ${paid.slice(0, -1)}`]],
    [["Authorization", "Basic dXNlcjpwYXNz"]],
    [
      ["Authorization", `Bearer ${paid}`],
      ["Authorization", `Bearer ${broke}`],
    ],
  );
}

const HEADER_NAMES = [
  "content-type",
  "accept",
  "x-request-id",
  "x-user-id",
  "user-agent",
  "anthropic-version",
  "anthropic-beta",
  "openai-organization",
  "accept-encoding",
  "content-encoding",
  "x-stainless-retry-count",
  "origin",
  "cookie",
  "x-forwarded-for",
  "host",
];

const extraHeaders: fc.Arbitrary<[string, string][]> = fc.array(
  fc.tuple(
    fc.oneof(fc.constantFrom(...HEADER_NAMES), fc.stringMatching(/^[a-zA-Z-]{1,20}$/)),
    fc.oneof(
      { weight: 3, arbitrary: fc.stringMatching(/^[\x21-\x7e][\x20-\x7e]{0,40}$/) },
      fc.constantFrom("application/json", "text/event-stream", "multipart/form-data", "gzip", "0"),
      anyText,
    ),
  ),
  { maxLength: 3 },
);

const CHAT = {
  model: "gpt-4o-mini",
  messages: [{ role: "user", content: "hi" }],
  max_tokens: 8,
};

/** Bodies a route may take, well formed, to mutate. */
const baseBodies: Record<string, unknown>[] = [
  CHAT,
  { ...CHAT, stream: true },
  { model: "claude-haiku-4-5", max_tokens: 8, messages: [{ role: "user", content: "hi" }] },
  { contents: [{ role: "user", parts: [{ text: "hi" }] }], generationConfig: { maxOutputTokens: 8 } },
  { model: "text-embedding-3-small", input: "hi" },
  { format: "json", range: { start: "2026-01-01", end: "2026-01-02" }, filters: { model: "x" } },
  { name: "k", allow: ["openai:/v1/chat/completions"] },
  { usd: 1, note: "n" },
];

const weirdValue = fc.oneof(
  fc.constantFrom(null, true, -1, 0, 0.5, 1e308, -1e308, Number.MAX_SAFE_INTEGER + 2, "10", "", [], {}, [
    [[[]]],
  ]),
  anyText,
  fc.jsonValue({ maxDepth: 3 }),
);

/** A body and the content type it goes with. */
function bodyOf(): fc.Arbitrary<{ body: Buffer | undefined; contentType: string | undefined }> {
  const json = (text: string) => ({ body: Buffer.from(text), contentType: "application/json" });
  const base = fc.constantFrom(...baseBodies);
  return fc.oneof(
    fc.constant({ body: undefined, contentType: undefined }),
    { weight: 4, arbitrary: base.map((b) => json(JSON.stringify(b))) },
    // Wrong types and values in known fields, or unknown fields.
    fc
      .tuple(
        base,
        fc.constantFrom(
          "model",
          "messages",
          "max_tokens",
          "stream",
          "n",
          "format",
          "range",
          "filters",
          "usd",
          "x",
        ),
        weirdValue,
      )
      .map(([b, field, value]) => json(JSON.stringify({ ...b, [field]: value }))),
    // Truncated JSON.
    fc.tuple(base, fc.nat()).map(([b, cut]) => {
      const text = JSON.stringify(b);
      return json(text.slice(0, cut % text.length));
    }),
    // Deep nesting.
    fc.integer({ min: 100, max: 200_000 }).map((depth) => json(`${"[".repeat(depth)}${"]".repeat(depth)}`)),
    fc
      .integer({ min: 100, max: 50_000 })
      .map((depth) => json(`${'{"a":'.repeat(depth)}1${"}".repeat(depth)}`)),
    // Huge numbers, written as JSON allows and JavaScript cannot hold.
    fc
      .constantFrom("1e400", "-1e400", "123456789012345678901234567890", "0.0000000000000000000001", "-0")
      .map((n) =>
        json(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"x"}],"max_tokens":${n},"n":${n}}`),
      ),
    // Invalid UTF-8 inside a JSON string, and raw bytes.
    fc.uint8Array({ minLength: 1, maxLength: 8 }).map((bytes) => ({
      body: Buffer.concat([
        Buffer.from('{"model":"gpt-4o-mini","messages":[{"role":"user","content":"'),
        Buffer.from([0xff, 0xfe, 0xc0, ...bytes]),
        Buffer.from('"}]}'),
      ]),
      contentType: "application/json",
    })),
    fc.uint8Array({ maxLength: 2048 }).map((bytes) => ({
      body: Buffer.from(bytes),
      contentType: "application/octet-stream",
    })),
    fc.jsonValue({ maxDepth: 4 }).map((v) => json(JSON.stringify(v) ?? "null")),
    // Multipart garbage: boundaries missing, wrong, unterminated, parts without headers.
    fc
      .tuple(
        fc.constantFrom(
          "multipart/form-data",
          "multipart/form-data; boundary=xyz",
          "multipart/form-data; boundary=",
        ),
        fc.constantFrom(
          '--xyz\r\nContent-Disposition: form-data; name="model"\r\n\r\nwhisper-1\r\n--xyz--\r\n',
          '--xyz\r\nContent-Disposition: form-data; name="file"; filename="a.mp3"\r\n\r\n\u0000\u0001',
          "--abc\r\n\r\n--abc--",
          "--xyz--",
          "garbage",
          "",
        ),
      )
      .map(([contentType, text]) => ({ body: Buffer.from(text, "latin1"), contentType })),
  );
}

export function fuzzRequest(credentials: FuzzCredentials): fc.Arbitrary<FuzzRequest> {
  return fc
    .record({
      route: routeOf(credentials),
      query: queryOf(credentials),
      extra: fc.oneof({ weight: 2, arbitrary: fc.constant([]) }, extraHeaders),
      body: bodyOf(),
    })
    .chain((parts) =>
      credentialHeaders(credentials, parts.route.audience).map((auth) => ({ ...parts, auth })),
    )
    .map(({ route, query, auth, extra, body }) => {
      const request: FuzzRequest = {
        method: route.method,
        target: route.path + query,
        headers: [
          ...auth,
          ...(body.contentType ? ([["content-type", body.contentType]] as [string, string][]) : []),
          ...extra,
        ],
        body: body.body,
      };
      // Counterexamples print short: a 200 KB body is no help in a report.
      return Object.assign(request, { [fc.toStringMethod]: () => describeRequest(request) });
    });
}

/** The request in one line, long values cut. */
export function describeRequest(request: FuzzRequest): string {
  const cut = (text: string, n: number) =>
    text.length > n ? `${text.slice(0, n)}...(${text.length})` : text;
  const body = request.body ? ` body=${JSON.stringify(cut(request.body.toString("latin1"), 160))}` : "";
  const headers = request.headers.map(([n, v]) => `${n}: ${cut(v, 60)}`).join(" | ");
  return `${request.method} ${cut(request.target, 200)} [${headers}]${body}`;
}

export interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

/**
 * Sends a request byte for byte on a fresh connection (`Connection: close`) and reads the answer until
 * the server closes. Header values are written as Latin-1, so any byte can be sent. Rejects when nothing
 * came back for `idleMs` (a hang is a finding too). The bound is generous: on a starved machine a
 * healthy server can be silent for many seconds, and the server's own timeouts answer well before it.
 */
export function sendRaw(port: number, request: FuzzRequest, idleMs = 120_000): Promise<RawAnswer> {
  const head = [
    `${request.method} ${request.target} HTTP/1.1`,
    "Host: 127.0.0.1",
    "Connection: close",
    ...request.headers.map(([name, value]) => `${name}: ${value}`),
    ...(request.body ? [`Content-Length: ${request.body.length}`] : []),
    "",
    "",
  ].join("\r\n");
  const bytes = Buffer.concat([Buffer.from(head, "latin1"), request.body ?? Buffer.alloc(0)]);
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1", () => socket.write(bytes));
    const chunks: Buffer[] = [];
    socket.setTimeout(idleMs, () => {
      socket.destroy();
      reject(new Error(`no answer within ${idleMs} ms`));
    });
    socket.on("data", (chunk: Buffer) => chunks.push(chunk));
    // The server may close before reading a body it refused: what it answered still counts.
    socket.on("error", (err: NodeJS.ErrnoException) => {
      if (err.code !== "ECONNRESET" && err.code !== "EPIPE") reject(err);
    });
    socket.on("close", () => {
      try {
        resolve(parseAnswer(Buffer.concat(chunks)));
      } catch (err) {
        reject(err);
      }
    });
  });
}

function parseAnswer(bytes: Buffer): RawAnswer {
  const end = bytes.indexOf("\r\n\r\n");
  if (end === -1)
    throw new Error(`no response head in ${JSON.stringify(bytes.toString("latin1").slice(0, 200))}`);
  const [statusLine = "", ...lines] = bytes.subarray(0, end).toString("latin1").split("\r\n");
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(":");
    headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
  }
  let body = bytes.subarray(end + 4);
  if (headers["transfer-encoding"] === "chunked") body = dechunk(body);
  return { status: Number(statusLine.split(" ")[1]), headers, body };
}

function dechunk(bytes: Buffer): Buffer {
  const parts: Buffer[] = [];
  let at = 0;
  for (;;) {
    const lineEnd = bytes.indexOf("\r\n", at);
    if (lineEnd === -1) return Buffer.concat(parts);
    const size = Number.parseInt(bytes.subarray(at, lineEnd).toString("latin1"), 16);
    if (!(size > 0)) return Buffer.concat(parts);
    parts.push(bytes.subarray(lineEnd + 2, lineEnd + 2 + size));
    at = lineEnd + 2 + size + 2;
  }
}
