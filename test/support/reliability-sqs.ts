import { createHash } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { QueueBatch } from "../../lambda/core/queue";

/**
 * A local stand-in for SQS's SendMessageBatch (the JSON protocol the SDK speaks), with outages:
 * `down` fails whole calls with a 500, `throttleEntries` refuses single entries as SQS does under
 * throttling (`Failed`, not a sender fault). What it accepted comes out as an SQS event, the shape the
 * consumer's event source hands to Lambda.
 */
export interface SqsStandIn {
  url: string;
  /** Calls failed with a 500 from now on, until `up()`. */
  down(): void;
  up(): void;
  /** The next `n` entries are refused as throttled. */
  throttleEntries(n: number): void;
  /** Message bodies accepted so far. */
  readonly accepted: string[];
  /** Whole calls failed so far. */
  readonly failedCalls: number;
  /** The accepted messages as one SQS event (delivered for the `n`-th time). */
  event(receiveCount?: number): QueueBatch;
  close(): Promise<void>;
}

interface BatchRequest {
  Entries: { Id: string; MessageBody: string }[];
}

export async function startSqsStandIn(): Promise<SqsStandIn> {
  const accepted: string[] = [];
  let isDown = false;
  let throttled = 0;
  let failedCalls = 0;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const reply = (status: number, body: unknown) => {
        res.writeHead(status, { "content-type": "application/x-amz-json-1.0" });
        res.end(JSON.stringify(body));
      };
      if (isDown) {
        failedCalls++;
        return reply(500, { __type: "com.amazonaws.sqs#InternalError", message: "stand-in is down" });
      }
      const request = JSON.parse(Buffer.concat(chunks).toString()) as BatchRequest;
      const Successful: object[] = [];
      const Failed: object[] = [];
      for (const entry of request.Entries) {
        if (throttled > 0) {
          throttled--;
          Failed.push({ Id: entry.Id, SenderFault: false, Code: "RequestThrottled", Message: "slow down" });
          continue;
        }
        accepted.push(entry.MessageBody);
        const md5 = createHash("md5").update(entry.MessageBody).digest("hex");
        Successful.push({ Id: entry.Id, MessageId: `m-${accepted.length}`, MD5OfMessageBody: md5 });
      }
      reply(200, { Successful, Failed });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    down() {
      isDown = true;
    },
    up() {
      isDown = false;
    },
    throttleEntries(n) {
      throttled = n;
    },
    accepted,
    get failedCalls() {
      return failedCalls;
    },
    event(receiveCount = 1) {
      return {
        Records: accepted.map((body, i) => ({
          messageId: `m-${i + 1}`,
          body,
          attributes: { ApproximateReceiveCount: String(receiveCount) },
        })),
      };
    },
    close() {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
