import { SendMessageCommand, type SQSClient } from "@aws-sdk/client-sqs";
import type { MeterQueue } from "../../core/billing-meter";

/**
 * The meter queue in AWS: one message per send (a message of 100 events stays under SQS's 256 KiB, ten
 * of them in one SendMessageBatch may not). Its Lambda retries a message, then dead-letters it.
 */
export class SqsMeterQueue implements MeterQueue {
  constructor(
    private readonly sqs: SQSClient,
    private readonly queueUrl: string,
  ) {}

  async send(bodies: string[]): Promise<void> {
    await Promise.all(
      bodies.map((body) =>
        this.sqs.send(new SendMessageCommand({ QueueUrl: this.queueUrl, MessageBody: body })),
      ),
    );
  }
}
