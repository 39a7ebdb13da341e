import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { syntheticRecord } from "../../bench/warehouse-records";
import type { RecordQueue } from "../../lambda/core/queue";

export interface RecordQueueUnderTest {
  queue: RecordQueue;
  /** Message bodies that reached the queue's far side (the consumer's batches, SQS's accepted messages). */
  arrived(): Promise<string[]>;
  close(): Promise<void>;
}

let serial = 0;

/** The cases every adapter of the record queue port (`core/queue.ts`) must pass, on the producer's side. */
export function recordQueueContract(name: string, make: () => Promise<RecordQueueUnderTest>): void {
  describe(`record queue contract: ${name}`, () => {
    let subject: RecordQueueUnderTest;
    beforeAll(async () => {
      subject = await make();
    });
    afterAll(() => subject.close());

    const fresh = (n: number) => Array.from({ length: n }, () => syntheticRecord(1_000_000 + ++serial));
    const ids = async () =>
      (await subject.arrived()).map((b) => (JSON.parse(b) as { transaction_id: string }).transaction_id);

    it("delivers a record sent as one message whose body is the record", async () => {
      const [record] = fresh(1);
      if (!record) throw new Error("no record");
      await subject.queue.send(record);
      const bodies = await subject.arrived();
      expect(bodies.map((b) => JSON.parse(b))).toContainEqual(record);
    });

    it("delivers each of many records sent at once exactly once (more than one SQS batch)", async () => {
      const records = fresh(25);
      await Promise.all(records.map((r) => subject.queue.send(r)));
      const arrived = await ids();
      for (const r of records) expect(arrived.filter((id) => id === r.transaction_id)).toHaveLength(1);
    });
  });
}
