import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";

/** One request the receiver got. */
export interface Received {
  headers: IncomingHttpHeaders;
  body: string;
  /** The status it answered. */
  status: number;
}

export interface WebhookReceiver {
  url: string;
  received: Received[];
  /** Statuses to answer, in order; once used up, 200. `"hang"` never answers (a timeout). */
  script: (number | "hang")[];
  close(): Promise<void>;
}

/** A webhook receiver on 127.0.0.1 that notes every request and answers as scripted. */
export async function startWebhookReceiver(): Promise<WebhookReceiver> {
  const received: Received[] = [];
  const receiver = { received, script: [] as (number | "hang")[] };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const next = receiver.script.shift() ?? 200;
      const body = Buffer.concat(chunks).toString("utf8");
      if (next === "hang") {
        received.push({ headers: req.headers, body, status: 0 });
        return;
      }
      received.push({ headers: req.headers, body, status: next });
      res.writeHead(next, { "content-type": "text/plain" }).end("ok");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return Object.assign(receiver, {
    url: `http://127.0.0.1:${port}/hooks`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  });
}
