import type { EventPublisher, NewEvent } from "../core/cloudevent";
import { type CreditBalance, decimalUsd, type LedgerEntry } from "../core/credits";
import { displayPrefix } from "../core/keys";
import { errorFields, type Logger } from "../core/logger";
import type { ApiKeyRecord } from "../core/model";

/** The events of a project's keys and credits: ids, names and amounts, never a key's secret or hash. */

export function keyCreated(key: ApiKeyRecord): NewEvent {
  return {
    type: "key.created",
    projectId: key.projectId,
    subject: key.keyId,
    data: {
      key_id: key.keyId,
      prefix: displayPrefix(key.keyId),
      name: key.name,
      allow: key.allow ?? null,
      expires_at: key.expiresAt === undefined ? null : new Date(key.expiresAt).toISOString(),
    },
  };
}

export function keyRevoked(key: ApiKeyRecord): NewEvent {
  return {
    type: "key.revoked",
    projectId: key.projectId,
    subject: key.keyId,
    data: { key_id: key.keyId, prefix: displayPrefix(key.keyId), name: key.name },
  };
}

export function creditsGranted(entry: LedgerEntry, balance: CreditBalance): NewEvent {
  return {
    type: "credits.granted",
    projectId: entry.projectId,
    subject: entry.ref,
    data: {
      grant_id: entry.ref,
      amount_usd: decimalUsd(entry.deltaMicros),
      source: entry.source ?? null,
      note: entry.note ?? null,
      available_usd: decimalUsd(balance.availableMicros),
    },
  };
}

/**
 * A refund's or lost dispute's debit (docs/billing.md): what was taken back of the payment's credits,
 * and what could not be because it was spent already.
 */
export function creditsDebited(entry: LedgerEntry, paymentId: string, balance: CreditBalance): NewEvent {
  return {
    type: "credits.debited",
    projectId: entry.projectId,
    subject: entry.ref,
    data: {
      debit_id: entry.ref,
      payment_id: paymentId,
      source: entry.source ?? null,
      amount_usd: decimalUsd(-entry.deltaMicros),
      not_taken_usd: decimalUsd(entry.uncollectedMicros ?? 0),
      available_usd: decimalUsd(balance.availableMicros),
    },
  };
}

/**
 * Publishes after the fact it reports was stored: the action stands whether or not its event goes
 * out, so a failure is logged (with a metric to alarm on), not thrown at the person who acted.
 */
export async function publishAfter(
  publisher: EventPublisher | undefined,
  event: NewEvent,
  logger: Logger,
): Promise<void> {
  if (!publisher) return;
  try {
    await publisher.publish(event);
  } catch (err) {
    logger.error("event not published", {
      ...errorFields(err),
      metric: "events.publish_failed",
      type: event.type,
    });
  }
}
