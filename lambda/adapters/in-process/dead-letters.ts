import type { ObjectStore } from "../../core/object-store";
import { DEAD_LETTER_PREFIX, type DeadLetter, type DeadLetterSink } from "../../core/queue";

/**
 * Dead letters as files, the local stand-in for an SQS dead-letter queue:
 * `dead-letter/<day>/<messageId>.json` holding the message body, the error and the delivery count.
 */
export class FolderDeadLetters implements DeadLetterSink {
  constructor(private readonly objects: ObjectStore) {}

  async put(letters: DeadLetter[]): Promise<void> {
    for (const letter of letters) {
      const day = new Date(letter.at).toISOString().slice(0, 10);
      const json = JSON.stringify({
        message_id: letter.messageId,
        error: letter.error,
        receive_count: letter.receiveCount,
        dead_lettered_at: new Date(letter.at).toISOString(),
        body: letter.body,
      });
      await this.objects.put(
        `${DEAD_LETTER_PREFIX}${day}/${letter.messageId}.json`,
        new TextEncoder().encode(json),
      );
    }
  }
}
