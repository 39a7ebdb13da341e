/**
 * Small local stand-ins speaking S3's, SQS's and Athena's wire protocols, for the Lambda handlers'
 * tests (the real AWS SDK clients pointed at them).
 */
import { createHash } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { type InteractionRecord, RECORD_COLUMNS } from "../../lambda/core/record";

export async function listen(handler: (req: IncomingMessage, body: Buffer, res: ServerResponse) => void) {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => handler(req, Buffer.concat(chunks), res));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

/** S3's REST API, path style, any bucket: PutObject, GetObject, ListObjectsV2, DeleteObject. */
export class FakeS3 {
  readonly objects = new Map<string, Buffer>();
  /** Writes to keys (`bucket/key`) this accepts are refused with 403, as a missing grant would be. */
  refuse: (path: string) => boolean = () => false;

  handle = (req: IncomingMessage, body: Buffer, res: ServerResponse): void => {
    const url = new URL(req.url ?? "/", "http://s3");
    const [, bucket = "", ...rest] = url.pathname.split("/");
    const path = `${bucket}/${decodeURIComponent(rest.join("/"))}`;
    const xml = (status: number, text: string) => {
      res.writeHead(status, { "content-type": "application/xml" });
      res.end(`<?xml version="1.0" encoding="UTF-8"?>${text}`);
    };
    if (req.method === "GET" && url.searchParams.get("list-type") === "2") {
      const prefix = `${bucket}/${url.searchParams.get("prefix") ?? ""}`;
      const contents = [...this.objects.keys()]
        .filter((k) => k.startsWith(prefix))
        .map(
          (k) =>
            `<Contents><Key>${k.slice(bucket.length + 1)}</Key><Size>${this.objects.get(k)?.length}</Size></Contents>`,
        )
        .join("");
      xml(200, `<ListBucketResult><IsTruncated>false</IsTruncated>${contents}</ListBucketResult>`);
      return;
    }
    if (req.method === "PUT") {
      if (this.refuse(path)) {
        xml(403, "<Error><Code>AccessDenied</Code><Message>no</Message></Error>");
        return;
      }
      this.objects.set(path, body);
      res.writeHead(200, { ETag: '"x"' });
      res.end();
      return;
    }
    if (req.method === "GET") {
      const found = this.objects.get(path);
      if (!found) {
        xml(404, "<Error><Code>NoSuchKey</Code><Message>none</Message></Error>");
        return;
      }
      res.writeHead(200, { "content-length": found.length });
      res.end(found);
      return;
    }
    if (req.method === "DELETE") {
      this.objects.delete(path);
      res.writeHead(204);
      res.end();
      return;
    }
    xml(400, "<Error><Code>NotImplemented</Code></Error>");
  };

  keys(prefix: string): string[] {
    return [...this.objects.keys()].filter((k) => k.startsWith(prefix)).sort();
  }
}

/** SQS's JSON protocol for SendMessageBatch; `down` answers 403 for one queue (a missing grant). */
export class FakeSqs {
  readonly received: { queue: string; body: string; attributes: Record<string, { StringValue: string }> }[] =
    [];
  down: string | undefined;

  handle = (_req: IncomingMessage, raw: Buffer, res: ServerResponse): void => {
    const request = JSON.parse(raw.toString()) as {
      QueueUrl: string;
      Entries: {
        Id: string;
        MessageBody: string;
        MessageAttributes?: Record<string, { StringValue: string }>;
      }[];
    };
    const queue = new URL(request.QueueUrl).pathname.split("/").at(-1) ?? "";
    if (queue === this.down) {
      res.writeHead(403, { "content-type": "application/x-amz-json-1.0" });
      res.end(JSON.stringify({ __type: "com.amazonaws.sqs#AccessDenied", message: "no" }));
      return;
    }
    const Successful = request.Entries.map((entry) => {
      this.received.push({ queue, body: entry.MessageBody, attributes: entry.MessageAttributes ?? {} });
      const md5 = createHash("md5").update(entry.MessageBody).digest("hex");
      return { Id: entry.Id, MessageId: `id-${this.received.length}`, MD5OfMessageBody: md5 };
    });
    res.writeHead(200, { "content-type": "application/x-amz-json-1.0" });
    res.end(JSON.stringify({ Successful, Failed: [] }));
  };

  on(queue: string) {
    return this.received.filter((r) => r.queue === queue);
  }
}

/** How Athena prints a record's values in query results (UTC timestamps, nulls without a value). */
export function athenaRow(record: InteractionRecord): { Data: { VarCharValue?: string }[] } {
  return {
    Data: RECORD_COLUMNS.map((c) => {
      const value = record[c.name];
      if (value === null) return {};
      if (c.kind === "timestamp") {
        return { VarCharValue: new Date(value as number).toISOString().replace("T", " ").replace("Z", "") };
      }
      return { VarCharValue: String(value) };
    }),
  };
}

/**
 * Athena's JSON API for one query at a time; answers with `rows` for the project it was asked about,
 * paged as Athena pages (the column names first, `MaxResults` rows a page). `failAfterPages` makes
 * GetQueryResults fail once that many pages were read; StopQueryExecution is recorded.
 */
export class FakeAthena {
  readonly started: Record<string, unknown>[] = [];
  readonly stopped: string[] = [];
  rows = new Map<string, InteractionRecord[]>();
  failAfterPages: number | undefined;
  pagesRead = 0;

  handle = (req: IncomingMessage, raw: Buffer, res: ServerResponse): void => {
    const action = String(req.headers["x-amz-target"]).replace("AmazonAthena.", "");
    const body = JSON.parse(raw.toString()) as Record<string, unknown>;
    let reply: unknown = {};
    if (action === "StartQueryExecution") {
      this.started.push(body);
      reply = { QueryExecutionId: `q-${this.started.length}` };
    } else if (action === "GetQueryExecution") {
      reply = { QueryExecution: { QueryExecutionId: body.QueryExecutionId, Status: { State: "SUCCEEDED" } } };
    } else if (action === "StopQueryExecution") {
      this.stopped.push(String(body.QueryExecutionId));
    } else if (action === "GetQueryResults") {
      if (this.failAfterPages !== undefined && this.pagesRead >= this.failAfterPages) {
        res.writeHead(400, { "content-type": "application/x-amz-json-1.1" });
        res.end(JSON.stringify({ __type: "InvalidRequestException", Message: "Query results expired." }));
        return;
      }
      this.pagesRead++;
      const started = this.started.at(-1) as { ExecutionParameters: string[] };
      const project = String(started.ExecutionParameters[0]).slice(1, -1);
      const header = { Data: RECORD_COLUMNS.map((c) => ({ VarCharValue: c.name })) };
      const all = [header, ...(this.rows.get(project) ?? []).map(athenaRow)];
      const from = Number(body.NextToken ?? 0);
      const to = from + Number(body.MaxResults ?? 1000);
      reply = { ResultSet: { Rows: all.slice(from, to) }, ...(to < all.length && { NextToken: String(to) }) };
    }
    res.writeHead(200, { "content-type": "application/x-amz-json-1.1" });
    res.end(JSON.stringify(reply));
  };
}
