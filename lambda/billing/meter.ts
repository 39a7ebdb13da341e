import {
  EVENTS_PER_MESSAGE,
  type MeterConnection,
  type MeterCounts,
  type MeterEvent,
  type MeterEventStatus,
  type MeterMessage,
  type MeterQueue,
  type MeterSender,
  type MeterStore,
  type MeterTarget,
  meterEventOf,
  openMeterSubject,
} from "../core/billing-meter";
import { errorFields, type Logger } from "../core/logger";
import type { BatchHandler, BatchResult } from "../core/queue";
import type { InteractionRecord } from "../core/record";

/** How long a project's connections are taken as read: a connect or disconnect shows within this. */
const CONNECTIONS_FRESH_MS = 5_000;

export interface OutboxDeps {
  store: MeterStore;
  queue: MeterQueue;
  logger: Logger;
  clock?: () => number;
}

/** Splits a list into messages' worth. */
function chunks<T>(items: T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/**
 * The warehouse consumer's listener of written records: the billable calls of connected projects are
 * noted as waiting and handed to the meter queue, a message per project, target and 100 events. A
 * record that comes again (the consumer retries a batch) is noted once; its message may be queued
 * twice, and the sender skips what was sent, so nothing is billed twice.
 */
export function meterOutbox(deps: OutboxDeps): (records: InteractionRecord[]) => Promise<void> {
  const clock = deps.clock ?? Date.now;
  const cache = new Map<string, { at: number; connections: MeterConnection[] }>();
  const connectionsOf = async (projectId: string) => {
    const cached = cache.get(projectId);
    if (cached && clock() - cached.at < CONNECTIONS_FRESH_MS) return cached.connections;
    const connections = await deps.store.connections(projectId);
    cache.set(projectId, { at: clock(), connections });
    return connections;
  };

  return async (records) => {
    const byProject = new Map<string, InteractionRecord[]>();
    for (const record of records) {
      const list = byProject.get(record.project_id);
      if (list) list.push(record);
      else byProject.set(record.project_id, [record]);
    }
    const bodies: string[] = [];
    const noted: MeterEvent[] = [];
    for (const [projectId, projectRecords] of byProject) {
      for (const connection of await connectionsOf(projectId)) {
        const events = projectRecords.flatMap((r) => meterEventOf(r, connection) ?? []);
        if (events.length === 0) continue;
        noted.push(...events);
        for (const part of chunks(events, EVENTS_PER_MESSAGE)) {
          const message: MeterMessage = { projectId, target: connection.target, events: part };
          bodies.push(JSON.stringify(message));
        }
      }
    }
    if (bodies.length === 0) return;
    await deps.store.noteWaiting(noted, clock());
    await deps.queue.send(bodies);
  };
}

export interface SenderDeps {
  store: MeterStore;
  /** The billing systems this deployment is configured for; a target without one fails its events. */
  senders: Partial<Record<MeterTarget, MeterSender>>;
  logger: Logger;
  clock?: () => number;
}

/** Why an event has no one to bill, or the subject to send it for. */
async function subjectOf(
  store: MeterStore,
  connection: MeterConnection,
  event: MeterEvent,
): Promise<{ subject: string } | { error: string }> {
  if (connection.target === "openmeter") return { subject: openMeterSubject(event, connection) };
  if (connection.perUser && event.userId !== null) {
    const customer = await store.customerOf(event.projectId, event.userId);
    if (customer) return { subject: customer };
    if (!connection.customer) {
      return {
        error: `no Stripe customer is mapped to end user '${event.userId.slice(0, 128)}' (dmt billing stripe map-user)`,
      };
    }
  }
  if (connection.customer) return { subject: connection.customer };
  return { error: "the call names no end user and the connection has no project customer (--customer)" };
}

/**
 * The meter queue's handler, the same behind SQS in AWS and the in-process queue locally: sends each
 * message's events that are not sent yet, and notes each one sent, failed (the billing system refused
 * it, or no customer applies: kept with the reason until resent) or still waiting (a fault worth a
 * retry: the message comes back, and after its last receive goes to the dead-letter queue). One
 * refused event blocks nothing else.
 */
export function createMeterSender(deps: SenderDeps): BatchHandler {
  const clock = deps.clock ?? Date.now;

  const handle = async (message: MeterMessage): Promise<boolean> => {
    const connection = (await deps.store.connections(message.projectId)).find(
      (c) => c.target === message.target,
    );
    const sender = deps.senders[message.target];
    const known = await deps.store.get(
      message.projectId,
      message.target,
      message.events.map((e) => e.transactionId),
    );
    const pending: { event: MeterEvent; status: MeterEventStatus }[] = [];
    for (const event of message.events) {
      const status = known.get(event.transactionId) ?? {
        ...event,
        state: "waiting" as const,
        attempts: 0,
        createdAt: clock(),
      };
      if (status.state === "sent") continue;
      pending.push({ event, status });
    }
    if (pending.length === 0) return true;

    const failed = (status: MeterEventStatus, reason: string): MeterEventStatus => ({
      ...status,
      state: "failed",
      lastError: reason,
      lastAttemptAt: clock(),
    });
    if (!connection || !sender) {
      const reason = !connection
        ? `the project has no ${message.target} connection`
        : `this deployment has no ${message.target} credentials configured`;
      await deps.store.update(pending.map(({ status }) => failed(status, reason)));
      return true;
    }

    const toSend: {
      connection: MeterConnection;
      event: MeterEvent;
      subject: string;
      status: MeterEventStatus;
    }[] = [];
    const updates: MeterEventStatus[] = [];
    for (const { event, status } of pending) {
      const subject = await subjectOf(deps.store, connection, event);
      if ("error" in subject)
        updates.push(failed({ ...status, attempts: status.attempts + 1 }, subject.error));
      else toSend.push({ connection, event, subject: subject.subject, status });
    }

    const outcomes = toSend.length === 0 ? [] : await sender.send(toSend);
    let retry = false;
    let refused = 0;
    toSend.forEach(({ status }, i) => {
      const outcome = outcomes[i] ?? { ok: false, permanent: false, message: "no answer" };
      const attempt = { ...status, attempts: status.attempts + 1, lastAttemptAt: clock() };
      if (outcome.ok) {
        const { lastError: _, ...sent } = attempt;
        updates.push({ ...sent, state: "sent" });
      } else if (outcome.permanent) {
        refused++;
        updates.push({ ...attempt, state: "failed", lastError: outcome.message });
      } else {
        retry = true;
        updates.push({ ...attempt, state: "waiting", lastError: outcome.message });
      }
    });
    await deps.store.update(updates);
    if (refused > 0) {
      deps.logger.warn("meter events refused; kept as failed for a resend", {
        metric: "billing.meter_refused",
        target: message.target,
        project: message.projectId,
        count: refused,
      });
    }
    return !retry;
  };

  return async (batch): Promise<BatchResult> => {
    const failures: string[] = [];
    await Promise.all(
      batch.Records.map(async (record) => {
        let message: MeterMessage;
        try {
          message = JSON.parse(record.body) as MeterMessage;
        } catch {
          deps.logger.error("a meter message is not JSON; dropped", { messageId: record.messageId });
          return;
        }
        try {
          if (!(await handle(message))) failures.push(record.messageId);
        } catch (err) {
          deps.logger.error("sending meter events failed; the message will be retried", {
            ...errorFields(err),
            target: message.target,
            project: message.projectId,
          });
          failures.push(record.messageId);
        }
      }),
    );
    return { batchItemFailures: failures.map((itemIdentifier) => ({ itemIdentifier })) };
  };
}

/** Most events one resend takes; run it again for more. */
export const RESEND_LIMIT = 1000;

/** Queues a project's failed events again (after a mapping is fixed): they go out with the same ids. */
export async function resendFailed(
  deps: { store: MeterStore; queue: MeterQueue },
  projectId: string,
  target: MeterTarget,
): Promise<{ queued: number }> {
  const failed = await deps.store.list(projectId, target, "failed", RESEND_LIMIT);
  if (failed.length === 0) return { queued: 0 };
  const events: MeterEvent[] = failed.map(
    ({ projectId, target, transactionId, endedAt, userId, value, usage }) => ({
      projectId,
      target,
      transactionId,
      endedAt,
      userId,
      value,
      usage,
    }),
  );
  await deps.store.update(failed.map((status) => ({ ...status, state: "waiting" as const })));
  await deps.queue.send(
    chunks(events, EVENTS_PER_MESSAGE).map((part) => JSON.stringify({ projectId, target, events: part })),
  );
  return { queued: failed.length };
}

export interface MeterStatus {
  projectId: string;
  connections: (MeterConnection & { counts: MeterCounts; failed: MeterEventStatus[] })[];
}

/** What `dmt billing status` shows: each connection, its counts, and the latest failed events. */
export async function meterStatus(
  store: MeterStore,
  projectId: string,
  failedLimit = 20,
): Promise<MeterStatus> {
  const connections = await store.connections(projectId);
  return {
    projectId,
    connections: await Promise.all(
      connections.map(async (connection) => ({
        ...connection,
        counts: await store.counts(projectId, connection.target),
        failed: await store.list(projectId, connection.target, "failed", failedLimit),
      })),
    ),
  };
}
