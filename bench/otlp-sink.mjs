/**
 * The OTLP receiver for bench/telemetry.bench.ts: accepts `POST /v1/traces` and `/v1/metrics` (any
 * encoding), answers 200 at once and counts requests and bytes, like a collector that keeps up.
 * `GET /count` says what arrived. `node bench/otlp-sink.mjs` prints `{"url": ...}` once listening.
 */
import { createServer } from "node:http";

const received = { traces: 0, metrics: 0, bytes: 0 };
const server = createServer((req, res) => {
  if (req.method === "GET") {
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(received));
    return;
  }
  req.on("data", (chunk) => {
    received.bytes += chunk.length;
  });
  req.on("end", () => {
    if (req.url === "/v1/traces") received.traces++;
    else if (req.url === "/v1/metrics") received.metrics++;
    res.writeHead(200, { "content-type": req.headers["content-type"] ?? "application/json" }).end();
  });
});
server.listen(0, "127.0.0.1", () => {
  process.stdout.write(`${JSON.stringify({ url: `http://127.0.0.1:${server.address().port}` })}\n`);
});
