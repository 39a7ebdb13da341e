import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SQSClient } from "@aws-sdk/client-sqs";
import { FsObjectStore } from "../../lambda/adapters/fs/object-store";
import { FolderDeadLetters } from "../../lambda/adapters/in-process/dead-letters";
import { InProcessQueue } from "../../lambda/adapters/in-process/queue";
import { SqsRecordQueue } from "../../lambda/adapters/sqs/queue";
import { RecordSpool } from "../../lambda/adapters/sqs/spool";
import { silentLogger } from "../../lambda/core/logger";
import { recordQueueContract } from "../support/queue-contract";
import { startSqsStandIn } from "../support/reliability-sqs";

// The local queue: what it delivers is what its consumer handler gets, in SQS-shaped batches.
recordQueueContract("InProcessQueue", async () => {
  const dir = mkdtempSync(join(tmpdir(), "dmt-contract-"));
  const bodies: string[] = [];
  const queue = new InProcessQueue({
    handler: async (batch) => {
      for (const message of batch.Records) bodies.push(message.body);
      return { batchItemFailures: [] };
    },
    deadLetters: new FolderDeadLetters(new FsObjectStore(dir)),
    logger: silentLogger,
    flushIntervalMs: 60_000,
    batchSize: 100,
    visibilityTimeoutMs: 0,
    maxReceives: 3,
  });
  return {
    queue,
    arrived: async () => {
      await queue.deliver();
      return [...bodies];
    },
    async close() {
      await queue.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

// SqsRecordQueue over SQS's JSON protocol (SendMessageBatch), served by the SQS stand-in: what arrives
// is what the stand-in accepted. Nothing is spooled while it is up.
recordQueueContract("SqsRecordQueue over the SQS stand-in", async () => {
  const dir = mkdtempSync(join(tmpdir(), "dmt-contract-"));
  const sqs = await startSqsStandIn();
  const client = new SQSClient({
    endpoint: sqs.url,
    region: "eu-west-1",
    credentials: { accessKeyId: "test", secretAccessKey: "test" },
  });
  const queue = new SqsRecordQueue(client, {
    queueUrl: "https://sqs.local/records",
    spool: new RecordSpool(new FsObjectStore(dir), silentLogger),
    logger: silentLogger,
  });
  return {
    queue,
    arrived: async () => [...sqs.accepted],
    async close() {
      await queue.close();
      client.destroy();
      await sqs.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});
