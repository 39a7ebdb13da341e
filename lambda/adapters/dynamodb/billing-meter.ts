import {
  ConditionalCheckFailedException,
  DeleteItemCommand,
  type DynamoDBClient,
  PutItemCommand,
  QueryCommand,
  type QueryCommandOutput,
} from "@aws-sdk/client-dynamodb";
import { marshall, unmarshall } from "@aws-sdk/util-dynamodb";
import type {
  MeterConnection,
  MeterCounts,
  MeterEvent,
  MeterEventState,
  MeterEventStatus,
  MeterStore,
  MeterTarget,
} from "../../core/billing-meter";
import { batchGet, batchWrite, queryAll, readItem } from "./paging";
import type { TableNames } from "./tables";

/** Meter events are kept this long after their call (Stripe takes none older than 35 days). */
const EVENT_KEEP_MS = 90 * 24 * 3600 * 1000;

const connectionKey = (target: MeterTarget) => `c#${target}`;
const userKey = (userId: string) => `u#${userId}`;
const eventKey = (target: MeterTarget, transactionId: string) => `e#${target}#${transactionId}`;
const stateKey = (projectId: string, target: MeterTarget, state: MeterEventState) =>
  `${projectId}#${target}#${state}`;

/**
 * The `billingMeter` table, per project: its connections (`c#<target>`), its end users' customers
 * (`u#<user id>`) and each call's meter event (`e#<target>#<transaction id>`), whose state the
 * `byState` index lists (`<project>#<target>#<state>`, ordered by the call's end) for the status and a
 * resend. No item holds a key: the deployment's Stripe key and endpoint token are secrets elsewhere.
 */
export class DynamoMeterStore implements MeterStore {
  constructor(
    private readonly db: DynamoDBClient,
    private readonly tables: Pick<TableNames, "billingMeter">,
  ) {}

  private get table() {
    return this.tables.billingMeter;
  }

  async connect(connection: MeterConnection): Promise<void> {
    await this.db.send(
      new PutItemCommand({
        TableName: this.table,
        Item: marshall(
          { ...connection, sk: connectionKey(connection.target) },
          { removeUndefinedValues: true },
        ),
      }),
    );
  }

  async disconnect(projectId: string, target: MeterTarget): Promise<boolean> {
    return this.remove(projectId, connectionKey(target));
  }

  async connections(projectId: string): Promise<MeterConnection[]> {
    const items = await queryAll(this.db, {
      TableName: this.table,
      KeyConditionExpression: "projectId = :p AND begins_with(sk, :c)",
      ExpressionAttributeValues: marshall({ ":p": projectId, ":c": "c#" }),
      ConsistentRead: true,
    });
    return items.map(({ sk: _, ...connection }) => connection as MeterConnection);
  }

  async mapUser(projectId: string, userId: string, customer: string): Promise<void> {
    await this.db.send(
      new PutItemCommand({
        TableName: this.table,
        Item: marshall({ projectId, sk: userKey(userId), customer }),
      }),
    );
  }

  async unmapUser(projectId: string, userId: string): Promise<boolean> {
    return this.remove(projectId, userKey(userId));
  }

  async customerOf(projectId: string, userId: string): Promise<string | undefined> {
    const item = await readItem(this.db, this.table, { projectId, sk: userKey(userId) });
    return item?.customer as string | undefined;
  }

  /**
   * Reads which are noted already, then writes the others in batches: a conditional put per event cost
   * a round trip each. Two consumers noting the same event at once both write it waiting, the same
   * item; one noted just after the sender marked it sent reads waiting again, and the sender's next
   * attempt finds it at Stripe (identifier taken) or OpenMeter (deduplicated) and marks it sent.
   */
  async noteWaiting(events: MeterEvent[], at: number): Promise<void> {
    const byProject = new Map<string, MeterEvent[]>();
    for (const event of events) {
      const key = `${event.projectId}\n${event.target}`;
      const list = byProject.get(key);
      if (list) list.push(event);
      else byProject.set(key, [event]);
    }
    for (const list of byProject.values()) {
      const first = list[0] as MeterEvent;
      const known = await this.get(
        first.projectId,
        first.target,
        list.map((e) => e.transactionId),
      );
      const fresh = list.filter((e) => !known.has(e.transactionId));
      await this.update(fresh.map((event) => ({ ...event, state: "waiting", attempts: 0, createdAt: at })));
    }
  }

  async get(
    projectId: string,
    target: MeterTarget,
    transactionIds: string[],
  ): Promise<Map<string, MeterEventStatus>> {
    const keys = [...new Set(transactionIds)].map((id) => marshall({ projectId, sk: eventKey(target, id) }));
    const items = await batchGet(this.db, this.table, keys, { ConsistentRead: true }, "billingMeter");
    const found = new Map<string, MeterEventStatus>();
    for (const item of items) {
      const status = fromItem(unmarshall(item));
      found.set(status.transactionId, status);
    }
    return found;
  }

  async update(statuses: MeterEventStatus[]): Promise<void> {
    if (statuses.length === 0) return;
    // One write per event: a batch must not name an item twice.
    const latest = new Map(statuses.map((s) => [`${s.target}#${s.transactionId}`, s]));
    await batchWrite(
      this.db,
      this.table,
      [...latest.values()].map((status) => ({ PutRequest: { Item: toItem(status) } })),
      "billingMeter",
    );
  }

  async counts(projectId: string, target: MeterTarget): Promise<MeterCounts> {
    const count = async (state: MeterEventState) => {
      let total = 0;
      let start: QueryCommandOutput["LastEvaluatedKey"];
      do {
        const out: QueryCommandOutput = await this.db.send(
          new QueryCommand({
            TableName: this.table,
            IndexName: "byState",
            KeyConditionExpression: "stateKey = :s",
            ExpressionAttributeValues: marshall({ ":s": stateKey(projectId, target, state) }),
            Select: "COUNT",
            ExclusiveStartKey: start,
          }),
        );
        total += out.Count ?? 0;
        start = out.LastEvaluatedKey;
      } while (start);
      return total;
    };
    const [sent, waiting, failed] = await Promise.all([count("sent"), count("waiting"), count("failed")]);
    return { sent, waiting, failed };
  }

  async list(
    projectId: string,
    target: MeterTarget,
    state: MeterEventState,
    limit: number,
  ): Promise<MeterEventStatus[]> {
    const out = await this.db.send(
      new QueryCommand({
        TableName: this.table,
        IndexName: "byState",
        KeyConditionExpression: "stateKey = :s",
        ExpressionAttributeValues: marshall({ ":s": stateKey(projectId, target, state) }),
        Limit: limit,
      }),
    );
    return (out.Items ?? []).map((item) => fromItem(unmarshall(item)));
  }

  private async remove(projectId: string, sk: string): Promise<boolean> {
    try {
      await this.db.send(
        new DeleteItemCommand({
          TableName: this.table,
          Key: marshall({ projectId, sk }),
          ConditionExpression: "attribute_exists(sk)",
        }),
      );
      return true;
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) return false;
      throw err;
    }
  }
}

function toItem(status: MeterEventStatus) {
  const { usage, ...rest } = status;
  return marshall(
    {
      ...rest,
      sk: eventKey(status.target, status.transactionId),
      stateKey: stateKey(status.projectId, status.target, status.state),
      // The call's end, then its id: a state's events list oldest first.
      order: `${String(status.endedAt).padStart(15, "0")}#${status.transactionId}`,
      usageJson: JSON.stringify(usage),
      expiresAt: Math.ceil((status.endedAt + EVENT_KEEP_MS) / 1000),
    },
    { removeUndefinedValues: true },
  );
}

function fromItem(item: Record<string, unknown>): MeterEventStatus {
  const { sk: _sk, stateKey: _s, order: _o, usageJson, expiresAt: _e, ...rest } = item;
  return {
    ...(rest as Omit<MeterEventStatus, "usage">),
    userId: (rest.userId as string | undefined) ?? null,
    usage: JSON.parse(usageJson as string),
  };
}
