import { randomBytes } from "node:crypto";
import {
  ConditionalCheckFailedException,
  DeleteItemCommand,
  type DynamoDBClient,
  PutItemCommand,
  QueryCommand,
  UpdateItemCommand,
} from "@aws-sdk/client-dynamodb";
import { marshall, unmarshall } from "@aws-sdk/util-dynamodb";
import type { Hold, HoldCharges } from "../../core/credits";
import type { HoldItem, HoldMarker, OwnerWrite, ResolveResult, TakeResult } from "./hold-model";
import { queryAll, readItem } from "./paging";

/**
 * Holds as items of their own, beside the item they take from (an "owner": a project's balance, a
 * budget window's counter), so that no number of open holds makes one item large or hot. Shared by
 * credits.ts and budgets.ts; the owner's money moves are theirs (`OwnerWrite`). Design and the
 * reasoning: docs/metering.md "No hot item".
 *
 * The items' attributes and the index `holdsDue`: docs/metering.md "The items".
 *
 * Take (one round trip on the call's path, then two off it):
 *   t1  owner: <take>, open += 1, held += m, p_<h> = {m,t,x}, seq += 1, holdOwner, due ?= x
 *                                                   if <room> and p_<h> absent (a retry finds its own p_)
 *   t2  hold item: put {m,t,x} if absent             the hold is now durable on its own item
 *   t3  owner: REMOVE p_<h>                           the owner is back to its small size
 * Note (one write per call in Lambda, on the hold item, never on the owner):
 *   n1  hold item: c,u,k = totals                    if m,t match, unclaimed, and k grows
 * Resolve (exactly once):
 *   r1  hold item: st = now (the claim), c,u,k = final  if unclaimed (or claimed > REPAIR_MS ago: a takeover)
 *   r2  <before>: the ledger's entries (credits), which decide the outcome
 *   r3  owner: <apply>, open -= 1, held -= m, r_<h> = now, REMOVE p_<h>   if r_<h> absent
 *   r4  hold item: delete                             if st is still our claim
 *   r5  owner: REMOVE r_<h>
 * A marker lives one round trip unless a process dies between two steps; then the sweeper finds the
 * owner through the index (its `due`) and finishes: a p_ whose hold item exists goes (t3); a p_ past
 * its expiry without one means t2 never ran: a tombstone hold item is put first (so a late t2 cannot
 * revive it) and the hold is released; an r_ whose hold item is gone goes (r5). A claim older than
 * REPAIR_MS is taken over: r3's condition on r_ applies the owner's part once. What this relies on: no
 * single request of a process arrives REPAIR_MS after it was sent (as the grants' repair delay).
 */

export const HOLD_INDEX = "holdsDue";
export const REPAIR_MS = 120_000;
/** Owners that may need the sweeper are spread over this many index partitions. */
const SHARDS = 16;
/** An owner with open holds none of which the index shows yet is looked at again this soon. */
const RECHECK_MS = 5 * 60_000;
/** A tombstone (a hold released without its item) stays this long, then DynamoDB TTL drops it. */
const TOMBSTONE_KEPT_S = 7 * 86_400;

export type { HoldItem, HoldMarker, OwnerWrite, ResolveResult, TakeResult } from "./hold-model";

const opts = { removeUndefinedValues: true };

export class HoldItems {
  /** t2 and t3 of the holds this process took, which later steps on the same hold wait for. */
  private readonly confirming = new Map<string, { done: Promise<void>; again: () => Promise<void> }>();
  /** This process's claims (r1) whose resolution failed halfway: its own retry takes them over at once. */
  private readonly failedClaims = new Map<string, number>();

  constructor(
    private readonly db: DynamoDBClient,
    private readonly table: string,
    private readonly pk: string,
    private readonly clock: () => number,
  ) {}

  static shardOf(owner: string): string {
    let h = 0;
    for (let i = 0; i < owner.length; i++) h = (h * 31 + owner.charCodeAt(i)) | 0;
    return `open#${Math.abs(h) % SHARDS}`;
  }

  keyOf(owner: string, holdId: string): string {
    return `${owner}#hold#${holdId}`;
  }

  /**
   * t1, then t2 and t3 in the background (waited for by the hold's next step in this process). `undo`
   * gives the room back should t2 find the id taken by another hold (a caller reusing an id).
   */
  async take(
    owner: string,
    holdId: string,
    marker: HoldMarker,
    write: OwnerWrite,
    undo: OwnerWrite,
  ): Promise<TakeResult> {
    const names = { "#p": `p_${holdId}`, "#open": "open", "#due": "due", ...write.names };
    try {
      const out = await this.db.send(
        new UpdateItemCommand({
          TableName: this.table,
          Key: marshall({ [this.pk]: owner }),
          UpdateExpression:
            `SET ${write.set}, #p = :marker, #open = if_not_exists(#open, :zero) + :one, ` +
            "held = if_not_exists(held, :zero) + :m, seq = if_not_exists(seq, :zero) + :one, " +
            "holdOwner = :shard, #due = if_not_exists(#due, :x)",
          ConditionExpression: `${write.condition ? `${write.condition} AND ` : ""}attribute_not_exists(#p)`,
          ExpressionAttributeNames: names,
          ExpressionAttributeValues: marshall(
            {
              ...write.values,
              ":marker": marker,
              ":zero": 0,
              ":one": 1,
              ":m": marker.m,
              ":x": marker.x,
              ":shard": HoldItems.shardOf(owner),
            },
            opts,
          ),
          ReturnValues: "ALL_NEW",
        }),
      );
      this.startConfirm(owner, holdId, marker, undo);
      return { taken: true, owner: unmarshall(out.Attributes ?? {}) };
    } catch (err) {
      if (!(err instanceof ConditionalCheckFailedException)) throw err;
    }
    const item = await this.readOwner(owner);
    const mine = item?.[`p_${holdId}`] as HoldMarker | undefined;
    // The SDK retries a request whose answer was lost: its first attempt may have taken this hold.
    if (mine && mine.m === marker.m && mine.t === marker.t) {
      this.startConfirm(owner, holdId, marker, undo);
      return { taken: true, owner: item as Record<string, unknown> };
    }
    if (mine) throw new Error(`Hold id ${holdId} is already in use under ${owner}.`);
    // A retry of a take whose item is written already (its marker gone): the same hold.
    const held = (await readItem(this.db, this.table, { [this.pk]: this.keyOf(owner, holdId) })) as
      | HoldItem
      | undefined;
    if (held && !held.tombstone && held.st === undefined) {
      if (held.m === marker.m && held.t === marker.t) return { taken: true, owner: item ?? {} };
      throw new Error(`Hold id ${holdId} is already in use under ${owner}.`);
    }
    return { taken: false, owner: item };
  }

  private startConfirm(owner: string, holdId: string, marker: HoldMarker, undo: OwnerWrite): void {
    // Tells this take's put from another take's item of the same id: a retried put finds its token.
    const token = randomBytes(6).toString("base64url");
    const key = this.keyOf(owner, holdId);
    const again = () => this.confirm(owner, holdId, marker, undo, token);
    const done = again();
    this.confirming.set(key, { done, again });
    // Nobody may wait for it (a hold left to the sweeper): it is forgotten once it succeeded.
    done.then(
      () => {
        if (this.confirming.get(key)?.done === done) this.confirming.delete(key);
      },
      () => {},
    );
  }

  /** t2, t3. */
  private async confirm(
    owner: string,
    holdId: string,
    marker: HoldMarker,
    undo: OwnerWrite,
    token: string,
  ): Promise<void> {
    const key = this.keyOf(owner, holdId);
    try {
      await this.db.send(
        new PutItemCommand({
          TableName: this.table,
          Item: marshall(
            { [this.pk]: key, owner, holdId, ...marker, holdOwner: owner, due: marker.x, w: token },
            opts,
          ),
          ConditionExpression: `attribute_not_exists(${this.pk})`,
        }),
      );
    } catch (err) {
      if (!(err instanceof ConditionalCheckFailedException)) throw err;
      const found = (await readItem(this.db, this.table, { [this.pk]: key })) as
        | (HoldItem & { w?: string })
        | undefined;
      // A tombstone: the sweeper released the hold (this process was frozen past its expiry) and
      // took the marker with it. Another take's item: this take debited a second time; given back.
      if (found && !found.tombstone && found.w !== token) {
        // The hold this id names is the other one: its later steps are checked against it.
        await this.undo(owner, holdId, marker, undo);
        return;
      }
    }
    await this.removeMarker(owner, `p_${holdId}`);
  }

  /** t1 given back, once (its marker's condition). */
  private async undo(owner: string, holdId: string, marker: HoldMarker, undo: OwnerWrite): Promise<void> {
    try {
      await this.db.send(
        new UpdateItemCommand({
          TableName: this.table,
          Key: marshall({ [this.pk]: owner }),
          UpdateExpression: `SET ${undo.set}, #open = #open - :one, held = held - :m, seq = seq + :one REMOVE #p`,
          ConditionExpression: "attribute_exists(#p) AND #p.t = :t",
          ExpressionAttributeNames: { "#p": `p_${holdId}`, "#open": "open", ...undo.names },
          ExpressionAttributeValues: marshall(
            { ...undo.values, ":one": 1, ":m": marker.m, ":t": marker.t },
            opts,
          ),
        }),
      );
    } catch (err) {
      if (!(err instanceof ConditionalCheckFailedException)) throw err;
    }
  }

  /** The hold's t2 and t3, should this process have taken it: done, or tried once more now. */
  private async settled(hold: Hold): Promise<void> {
    const key = this.keyOf(hold.projectId, hold.holdId);
    const pending = this.confirming.get(key);
    if (!pending) return;
    try {
      await pending.done.catch(pending.again);
    } finally {
      this.confirming.delete(key);
    }
  }

  /** n1. False when the hold is resolved or being resolved. */
  async note(hold: Hold, charges: HoldCharges): Promise<boolean> {
    await this.settled(hold);
    try {
      await this.db.send(
        new UpdateItemCommand({
          TableName: this.table,
          Key: marshall({ [this.pk]: this.keyOf(hold.projectId, hold.holdId) }),
          UpdateExpression: "SET c = :c, u = :u, k = :k",
          ConditionExpression:
            "m = :m AND t = :t AND attribute_not_exists(st) AND attribute_not_exists(tombstone) AND " +
            "(attribute_not_exists(k) OR k < :k)",
          ExpressionAttributeValues: marshall({
            ":c": charges.chargedMicros,
            ":u": charges.uncollectedMicros,
            ":k": charges.calls,
            ":m": hold.micros,
            ":t": hold.createdAt,
          }),
        }),
      );
      return true;
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) return false;
      throw err;
    }
  }

  /**
   * r1-r5. `charges`: the final totals (a process settling its lease), or undefined to settle at what
   * was noted (the sweeper). `before` runs between the claim and the owner's write, with the item as
   * claimed, and says what the owner's write adds (and what the caller gets back).
   */
  async resolve<T>(
    hold: Pick<Hold, "projectId" | "holdId" | "micros" | "createdAt">,
    charges: HoldCharges | undefined,
    before: (item: HoldItem) => Promise<{ write: OwnerWrite; value: T }>,
    /** The sweeper's time (a claim older than REPAIR_MS by it is taken over). */
    now = this.clock(),
  ): Promise<ResolveResult<T>> {
    await this.settled(hold as Hold);
    const key = this.keyOf(hold.projectId, hold.holdId);
    const claimed = await this.claim(key, hold, charges, now);
    if (claimed === "gone") return { done: "before" };
    if (claimed === "busy") return { done: "elsewhere" };
    let value: T;
    try {
      const resolved = await before(claimed);
      value = resolved.value;
      await this.applyToOwner(hold.projectId, hold.holdId, claimed.m, resolved.write);
    } catch (err) {
      this.failedClaims.set(key, now);
      throw err;
    }
    try {
      await this.db.send(
        new DeleteItemCommand({
          TableName: this.table,
          Key: marshall({ [this.pk]: key }),
          ConditionExpression: "st = :st",
          ExpressionAttributeValues: marshall({ ":st": now }),
        }),
      );
    } catch (err) {
      // Taken over meanwhile: the taker finishes (and removes r_).
      if (err instanceof ConditionalCheckFailedException) return { done: "now", value };
      throw err;
    }
    await this.removeMarker(hold.projectId, `r_${hold.holdId}`);
    return { done: "now", value };
  }

  private async claim(
    key: string,
    hold: Pick<Hold, "micros" | "createdAt">,
    charges: HoldCharges | undefined,
    now: number,
  ): Promise<HoldItem | "gone" | "busy"> {
    let previous: number | undefined;
    for (let attempt = 0; attempt < 2; attempt++) {
      const final = charges ? ", c = :c, u = :u, k = :k" : "";
      try {
        const out = await this.db.send(
          new UpdateItemCommand({
            TableName: this.table,
            Key: marshall({ [this.pk]: key }),
            UpdateExpression: `SET st = :now, #due = :repair${final}`,
            ConditionExpression: `m = :m AND t = :t AND attribute_not_exists(tombstone) AND ${
              previous === undefined ? "attribute_not_exists(st)" : "st = :previous"
            }`,
            ExpressionAttributeNames: { "#due": "due" },
            ExpressionAttributeValues: marshall(
              {
                ":now": now,
                ":repair": now + REPAIR_MS,
                ":m": hold.micros,
                ":t": hold.createdAt,
                ":previous": previous,
                ...(charges && {
                  ":c": charges.chargedMicros,
                  ":u": charges.uncollectedMicros,
                  ":k": charges.calls,
                }),
              },
              opts,
            ),
            ReturnValues: "ALL_NEW",
          }),
        );
        this.failedClaims.delete(key);
        return unmarshall(out.Attributes ?? {}) as HoldItem;
      } catch (err) {
        if (!(err instanceof ConditionalCheckFailedException)) throw err;
      }
      const item = (await readItem(this.db, this.table, { [this.pk]: key })) as HoldItem | undefined;
      if (!item || item.tombstone) return "gone";
      if (item.m !== hold.micros || item.t !== hold.createdAt) {
        throw new Error(`Hold ${key} does not match the open hold of that id.`);
      }
      // Claimed by a process that stopped halfway: taken over once its claim is old enough, or at once
      // when the claim is this process's own (a settlement retried after its ledger write failed).
      const own = item.st !== undefined && this.failedClaims.get(key) === item.st;
      if (!own && (item.st === undefined || item.st + REPAIR_MS > now)) return "busy";
      previous = item.st;
    }
    return "busy";
  }

  /** r3: exactly once per hold, by its r_ marker. */
  private async applyToOwner(
    owner: string,
    holdId: string,
    micros: number,
    write: OwnerWrite,
  ): Promise<void> {
    try {
      await this.db.send(
        new UpdateItemCommand({
          TableName: this.table,
          Key: marshall({ [this.pk]: owner }),
          UpdateExpression:
            `SET ${write.set}, #r = :now, #open = #open - :one, held = held - :m, seq = seq + :one ` +
            "REMOVE #p",
          ConditionExpression: `attribute_not_exists(#r)${write.condition ? ` AND ${write.condition}` : ""}`,
          ExpressionAttributeNames: {
            "#r": `r_${holdId}`,
            "#p": `p_${holdId}`,
            "#open": "open",
            ...write.names,
          },
          ExpressionAttributeValues: marshall(
            { ...write.values, ":now": this.clock(), ":one": 1, ":m": micros },
            opts,
          ),
        }),
      );
    } catch (err) {
      // Applied by an earlier attempt of ours or of the process we took over from.
      if (!(err instanceof ConditionalCheckFailedException)) throw err;
    }
  }

  private async removeMarker(owner: string, marker: string): Promise<void> {
    try {
      await this.db.send(
        new UpdateItemCommand({
          TableName: this.table,
          Key: marshall({ [this.pk]: owner }),
          UpdateExpression: "REMOVE #marker",
          ConditionExpression: "attribute_exists(#marker)",
          ExpressionAttributeNames: { "#marker": marker },
        }),
      );
    } catch (err) {
      if (!(err instanceof ConditionalCheckFailedException)) throw err;
    }
  }

  /**
   * The owner's open hold items (a read for the few who need noted charges: not on a call's path),
   * less those `ownerItem`, read just before, shows applied (r3 done, r4 not yet: counted there).
   */
  async openHolds(owner: string, ownerItem?: object): Promise<HoldItem[]> {
    const keys = await this.indexKeys(owner);
    const items = await Promise.all(keys.map((key) => readItem(this.db, this.table, { [this.pk]: key })));
    return items.filter(
      (item): item is HoldItem =>
        item !== undefined &&
        !(item as HoldItem).tombstone &&
        !(ownerItem && Object.hasOwn(ownerItem, `r_${(item as HoldItem).holdId}`)),
    );
  }

  /**
   * The owner and its open holds' items, read again when a take or resolution (`seq`) came between the
   * two reads: a settlement moves a hold's noted charges into the owner, and a sum of one read from
   * before it and one from after misses or doubles them. A busy owner's `rounds`-th pair is taken as read.
   */
  async readWithHolds<T extends { open?: number; seq?: number }>(
    owner: string,
    rounds: number,
  ): Promise<{ item: T | undefined; holds: HoldItem[] }> {
    let item = (await this.readOwner(owner)) as T | undefined;
    for (let round = 1; (item?.open ?? 0) > 0; round++) {
      const holds = await this.openHolds(owner, item);
      if (round >= rounds) return { item, holds };
      const again = (await this.readOwner(owner)) as T | undefined;
      if (again?.seq === item?.seq) return { item, holds };
      item = again;
    }
    return { item, holds: [] };
  }

  /**
   * The sweeper: the owners due (from the index), and under each its expired holds (from the index),
   * resolved by `expire`; then the markers a dead process left. Reads nothing that is not open.
   */
  async sweep(
    now: number,
    expire: (item: HoldItem) => Promise<boolean>,
    release: (marker: HoldMarker & { owner: string; holdId: string }) => Promise<OwnerWrite>,
    owner?: (item: Record<string, unknown>) => Promise<void>,
  ): Promise<{ resolved: number; released: number; owners: number }> {
    const report = { resolved: 0, released: 0, owners: 0 };
    for (let shard = 0; shard < SHARDS; shard++) {
      for (const ownerKey of await this.indexKeys(`open#${shard}`, now)) {
        report.owners++;
        for (const key of await this.indexKeys(ownerKey, now)) {
          const item = (await readItem(this.db, this.table, { [this.pk]: key })) as HoldItem | undefined;
          if (!item || item.tombstone) continue;
          // Expired, or claimed by a process that stopped halfway (taken over).
          if (item.st === undefined ? item.x > now : item.st + REPAIR_MS > now) continue;
          if (await expire(item)) report.resolved++;
        }
        const ownerItem = await this.readOwner(ownerKey);
        if (!ownerItem) continue;
        await owner?.(ownerItem);
        report.released += await this.repairMarkers(ownerKey, ownerItem, now, release);
        await this.reschedule(ownerKey, now);
      }
    }
    return report;
  }

  private async repairMarkers(
    owner: string,
    item: Record<string, unknown>,
    now: number,
    release: (marker: HoldMarker & { owner: string; holdId: string }) => Promise<OwnerWrite>,
  ): Promise<number> {
    let released = 0;
    for (const [name, value] of Object.entries(item)) {
      const holdId = name.slice(2);
      if (name.startsWith("r_") && (value as number) + REPAIR_MS <= now) {
        // r3 happened; r5 did not: the marker goes once the hold item is gone (r4).
        const open = await readItem(this.db, this.table, { [this.pk]: this.keyOf(owner, holdId) });
        if (!open) await this.removeMarker(owner, name);
      } else if (name.startsWith("p_") && (value as HoldMarker).x <= now) {
        const marker = value as HoldMarker;
        if (await this.putTombstone(owner, holdId, marker)) {
          // t2 never ran: nothing was noted; the whole hold goes back, once (the marker's condition).
          const write = await release({ ...marker, owner, holdId });
          try {
            await this.db.send(
              new UpdateItemCommand({
                TableName: this.table,
                Key: marshall({ [this.pk]: owner }),
                UpdateExpression: `SET ${write.set}, #open = #open - :one, held = held - :m, seq = seq + :one REMOVE #p`,
                ConditionExpression: "attribute_exists(#p)",
                ExpressionAttributeNames: { "#p": name, "#open": "open", ...write.names },
                ExpressionAttributeValues: marshall({ ...write.values, ":one": 1, ":m": marker.m }, opts),
              }),
            );
            released++;
          } catch (err) {
            if (!(err instanceof ConditionalCheckFailedException)) throw err;
          }
          // Its take's own confirmation, should the process wake: finds the tombstone, leaves it.
        } else {
          // Its item exists: the hold is resolved through it; only t3 was missing.
          await this.removeMarker(owner, name);
        }
      }
    }
    return released;
  }

  private async putTombstone(owner: string, holdId: string, marker: HoldMarker): Promise<boolean> {
    try {
      await this.db.send(
        new PutItemCommand({
          TableName: this.table,
          Item: marshall({
            [this.pk]: this.keyOf(owner, holdId),
            owner,
            holdId,
            ...marker,
            tombstone: true,
            gcAt: Math.ceil(this.clock() / 1000) + TOMBSTONE_KEPT_S,
          }),
          ConditionExpression: `attribute_not_exists(${this.pk})`,
        }),
      );
      return true;
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) return false;
      throw err;
    }
  }

  /**
   * The owner's next look: its earliest open hold's `due`, or soon while it has holds the index does
   * not show yet or markers; out of the index when nothing is open (unless a take came meanwhile).
   */
  private async reschedule(owner: string, now: number): Promise<void> {
    const item = await this.readOwner(owner);
    if (!item) return;
    const markers = Object.keys(item).filter((name) => name.startsWith("p_") || name.startsWith("r_"));
    const grants = Object.keys((item.grants as Record<string, unknown> | undefined) ?? {}).length;
    const legacy = Object.keys((item.holds as Record<string, unknown> | undefined) ?? {}).length;
    const open = (item.open as number | undefined) ?? 0;
    const next = await this.db.send(
      new QueryCommand({
        TableName: this.table,
        IndexName: HOLD_INDEX,
        KeyConditionExpression: "holdOwner = :o",
        ExpressionAttributeValues: marshall({ ":o": owner }),
        Limit: 1,
      }),
    );
    const first = next.Items?.[0] && (unmarshall(next.Items[0]).due as number);
    const names = { "#due": "due", "#open": "open" };
    try {
      if (open === 0 && markers.length === 0 && grants === 0 && legacy === 0 && first === undefined) {
        await this.db.send(
          new UpdateItemCommand({
            TableName: this.table,
            Key: marshall({ [this.pk]: owner }),
            UpdateExpression: "REMOVE holdOwner, #due",
            ConditionExpression: "seq = :seq AND (attribute_not_exists(#open) OR #open = :zero)",
            ExpressionAttributeNames: names,
            ExpressionAttributeValues: marshall({ ":seq": item.seq ?? 0, ":zero": 0 }),
          }),
        );
        return;
      }
      const soon =
        markers.length > 0 || grants > 0 || legacy > 0 || first === undefined
          ? now + RECHECK_MS
          : Number.MAX_SAFE_INTEGER;
      await this.db.send(
        new UpdateItemCommand({
          TableName: this.table,
          Key: marshall({ [this.pk]: owner }),
          UpdateExpression: "SET #due = :due, holdOwner = :shard",
          ExpressionAttributeNames: { "#due": "due" },
          ExpressionAttributeValues: marshall({
            ":due": Math.max(now + 1, Math.min(first ?? Number.MAX_SAFE_INTEGER, soon)),
            ":shard": HoldItems.shardOf(owner),
          }),
        }),
      );
    } catch (err) {
      if (!(err instanceof ConditionalCheckFailedException)) throw err;
    }
  }

  /** The keys under an index partition (an owner, or the owners') due by `dueBy` (the sort key): all by default. */
  private async indexKeys(partition: string, dueBy = Number.MAX_SAFE_INTEGER): Promise<string[]> {
    const items = await queryAll(this.db, {
      TableName: this.table,
      IndexName: HOLD_INDEX,
      KeyConditionExpression: "holdOwner = :o AND #due <= :now",
      ExpressionAttributeNames: { "#due": "due" },
      ExpressionAttributeValues: marshall({ ":o": partition, ":now": dueBy }),
    });
    return items.map((item) => item[this.pk] as string);
  }

  /** An owner's item, read strongly. */
  async readOwner(owner: string): Promise<Record<string, unknown> | undefined> {
    return (await readItem(this.db, this.table, { [this.pk]: owner })) as Record<string, unknown> | undefined;
  }
}
