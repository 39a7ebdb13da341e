import { SendMessageCommand, type SQSClient } from "@aws-sdk/client-sqs";
import type { DeliveryQueue } from "../../core/webhook-delivery";

/** SQS delays a message at most 900 s; the delivery code carries longer waits in the message. */
const MAX_DELAY_SECONDS = 900;

/** The webhook delivery queue in AWS: one message per send, delayed with `DelaySeconds`. */
export class SqsDeliveryQueue implements DeliveryQueue {
  constructor(
    private readonly sqs: SQSClient,
    private readonly queueUrl: string,
  ) {}

  async send(body: string, delayMs: number): Promise<void> {
    await this.sqs.send(
      new SendMessageCommand({
        QueueUrl: this.queueUrl,
        MessageBody: body,
        DelaySeconds: Math.min(MAX_DELAY_SECONDS, Math.max(0, Math.ceil(delayMs / 1000))),
      }),
    );
  }
}
