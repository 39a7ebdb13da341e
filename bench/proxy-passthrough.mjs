/**
 * The floor for bench/proxy.bench.ts: a bare node:http reverse proxy with a keep-alive agent, no
 * checks, no headers touched, bodies piped both ways. `node bench/proxy-passthrough.mjs <target origin>`
 * prints `{"url": ...}` once listening.
 */
import { Agent, createServer, request } from "node:http";

const target = new URL(process.argv[2] ?? "");
const agent = new Agent({ keepAlive: true, maxSockets: 256 });

const server = createServer((req, res) => {
  const upstream = request(
    {
      host: target.hostname,
      port: target.port,
      method: req.method,
      path: req.url,
      headers: req.headers,
      agent,
    },
    (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    },
  );
  upstream.on("error", () => res.destroy());
  res.on("close", () => {
    if (!res.writableFinished) upstream.destroy();
  });
  req.pipe(upstream);
});
server.listen(0, "127.0.0.1", () => {
  process.stdout.write(`${JSON.stringify({ url: `http://127.0.0.1:${server.address().port}` })}\n`);
});
process.on("SIGTERM", () => server.close(() => process.exit(0)));
