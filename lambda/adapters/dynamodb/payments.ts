import { randomBytes } from "node:crypto";
import {
  ConditionalCheckFailedException,
  type DynamoDBClient,
  PutItemCommand,
  UpdateItemCommand,
} from "@aws-sdk/client-dynamodb";
import { marshall, unmarshall } from "@aws-sdk/util-dynamodb";
import type {
  BillingProfile,
  Claim,
  PaymentRecord,
  PaymentStore,
  RechargeSettings,
} from "../../core/payments";
import { queryAll, readItem, scanItems } from "./paging";
import type { TableNames } from "./tables";

/**
 * Payments and billing profiles over DynamoDB (the `payments` table, keyed by project and payment id;
 * a project's profile is its item `#profile`). A claim is a lease on one item, taken by a conditional
 * update (no holder, or the holder's lease ran out) and ended by a write conditional on its token: the
 * one way two deliveries of a payment, or two recharges of a project, never run at once.
 */
const PROFILE = "#profile";
const opts = { removeUndefinedValues: true };

type Stored<T> = T & { claimToken?: string; claimUntil?: number };

export class DynamoPayments implements PaymentStore {
  constructor(
    private readonly db: DynamoDBClient,
    private readonly tables: Pick<TableNames, "payments">,
  ) {}

  async claimPayment(init: PaymentRecord, now: number, leaseMs: number): Promise<Claim<PaymentRecord>> {
    const { projectId, paymentId, ...fields } = init;
    const names: Record<string, string> = {};
    const values: Record<string, unknown> = {};
    const sets = Object.entries(fields).map(([name, value], i) => {
      names[`#f${i}`] = name;
      values[`:f${i}`] = value;
      return `#f${i} = if_not_exists(#f${i}, :f${i})`;
    });
    const claimed = await this.claim({ projectId, paymentId }, now, leaseMs, sets, names, values);
    return claimed.ok ? { ...claimed, value: recordOf(claimed.value) } : claimed;
  }

  async releasePayment(record: PaymentRecord, token: string): Promise<boolean> {
    try {
      await this.db.send(
        new PutItemCommand({
          TableName: this.tables.payments,
          Item: marshall(record, opts),
          ConditionExpression: "claimToken = :token",
          ExpressionAttributeValues: marshall({ ":token": token }),
        }),
      );
      return true;
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) return false;
      throw err;
    }
  }

  async getPayment(projectId: string, paymentId: string): Promise<PaymentRecord | undefined> {
    const item = await readItem(this.db, this.tables.payments, { projectId, paymentId });
    return item && recordOf(item);
  }

  async listPayments(projectId: string): Promise<PaymentRecord[]> {
    const items = await queryAll(this.db, {
      TableName: this.tables.payments,
      KeyConditionExpression: "projectId = :p",
      ExpressionAttributeValues: marshall({ ":p": projectId }),
    });
    return items.filter((item) => item.paymentId !== PROFILE).map(recordOf);
  }

  async getProfile(projectId: string): Promise<BillingProfile | undefined> {
    const item = await readItem(this.db, this.tables.payments, { projectId, paymentId: PROFILE });
    return item && profileOf(item);
  }

  async updateProfile(
    projectId: string,
    fields: { customerId?: string; recharge?: RechargeSettings | null; armed?: boolean },
  ): Promise<BillingProfile> {
    const sets: string[] = [];
    const removes: string[] = [];
    const values: Record<string, unknown> = {};
    for (const [name, value] of Object.entries(fields)) {
      if (value === undefined) continue;
      if (value === null) removes.push(name);
      else {
        sets.push(`${name} = :${name}`);
        values[`:${name}`] = value;
      }
    }
    const out = await this.db.send(
      new UpdateItemCommand({
        TableName: this.tables.payments,
        Key: marshall({ projectId, paymentId: PROFILE }),
        UpdateExpression:
          [
            sets.length > 0 ? `SET ${sets.join(", ")}` : "",
            removes.length > 0 ? `REMOVE ${removes.join(", ")}` : "",
          ]
            .join(" ")
            .trim() || "SET projectId = projectId",
        ...(Object.keys(values).length > 0 && { ExpressionAttributeValues: marshall(values, opts) }),
        ReturnValues: "ALL_NEW",
      }),
    );
    return profileOf(unmarshall(out.Attributes ?? {}));
  }

  async claimProfile(projectId: string, now: number, leaseMs: number): Promise<Claim<BillingProfile>> {
    const claimed = await this.claim({ projectId, paymentId: PROFILE }, now, leaseMs, [], {}, {});
    return claimed.ok ? { ...claimed, value: profileOf(claimed.value) } : claimed;
  }

  async releaseProfile(
    projectId: string,
    token: string,
    fields: { armed?: boolean; lastRecharge?: BillingProfile["lastRecharge"] },
  ): Promise<boolean> {
    const sets = Object.entries(fields)
      .filter(([, value]) => value !== undefined)
      .map(([name]) => `${name} = :${name}`);
    const values = Object.fromEntries(Object.entries(fields).map(([name, value]) => [`:${name}`, value]));
    try {
      await this.db.send(
        new UpdateItemCommand({
          TableName: this.tables.payments,
          Key: marshall({ projectId, paymentId: PROFILE }),
          UpdateExpression: `${sets.length > 0 ? `SET ${sets.join(", ")} ` : ""}REMOVE claimToken, claimUntil`,
          ConditionExpression: "claimToken = :token",
          ExpressionAttributeValues: marshall({ ...values, ":token": token }, opts),
        }),
      );
      return true;
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) return false;
      throw err;
    }
  }

  async *rechargeProfiles(): AsyncIterable<BillingProfile> {
    const items = scanItems(this.db, {
      TableName: this.tables.payments,
      FilterExpression: "paymentId = :profile AND attribute_exists(recharge)",
      ExpressionAttributeValues: marshall({ ":profile": PROFILE }),
    });
    for await (const item of items) yield profileOf(item);
  }

  /** The lease: taken when no one holds it or the holder's time ran out. */
  private async claim(
    key: { projectId: string; paymentId: string },
    now: number,
    leaseMs: number,
    sets: string[],
    names: Record<string, string>,
    values: Record<string, unknown>,
  ): Promise<Claim<Stored<Record<string, unknown>>>> {
    const token = randomBytes(12).toString("base64url");
    try {
      const out = await this.db.send(
        new UpdateItemCommand({
          TableName: this.tables.payments,
          Key: marshall(key),
          UpdateExpression: `SET ${["claimToken = :token", "claimUntil = :until", ...sets].join(", ")}`,
          ConditionExpression: "attribute_not_exists(claimUntil) OR claimUntil < :now",
          ...(Object.keys(names).length > 0 && { ExpressionAttributeNames: names }),
          ExpressionAttributeValues: marshall(
            { ...values, ":token": token, ":until": now + leaseMs, ":now": now },
            opts,
          ),
          ReturnValues: "ALL_NEW",
        }),
      );
      return { ok: true, token, value: unmarshall(out.Attributes ?? {}) };
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) return { ok: false };
      throw err;
    }
  }
}

function recordOf(item: Record<string, unknown>): PaymentRecord {
  const { claimToken: _t, claimUntil: _u, ...record } = item;
  return record as unknown as PaymentRecord;
}

function profileOf(item: Record<string, unknown>): BillingProfile {
  const { claimToken: _t, claimUntil: _u, paymentId: _p, ...profile } = item;
  return profile as unknown as BillingProfile;
}
