import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { InteractionIndex, InteractionListQuery, InteractionSummary } from "../../core/interactions";
import type { InteractionRecord } from "../../core/record";
import type { RetentionCutoffs, RetentionIndex } from "../../core/retention";
import { expire, purgeTransactions, purgeUser } from "./interactions/purge";
import { getRecord, listPage } from "./interactions/read";
import { IndexTable } from "./interactions/table";
import { writeRecords } from "./interactions/write";
import { DynamoUsageRollups } from "./rollups";
import type { TableNames } from "./tables";

export { ROUND_RECORDS } from "./interactions/layout";
export { PAGE_SCAN_BUDGET } from "./interactions/read";

/**
 * The recent-interactions index in the `interactions` table, with the rollups it keeps in step.
 *
 * Items, per project (partition `projectId`):
 *   `p#<bucket>#<newest>#<pack id>`, `q#<bucket>#<newest>#<pack id>`
 *                           a pack: up to 100 interactions of one write that started in the same 10
 *                           seconds (the bucket; `newest`, when the newest of them started; both
 *                           zero-padded epoch ms), in two items: `p#`, the summaries a list row shows
 *                           (`entriesGz`), and `q#`, the whole records, bodies included (`recordsGz`),
 *                           each gzipped JSON, so that a page reads no body. `v` counts an item's
 *                           rewrites (purges, retention). The pack id is a hash of its transaction
 *                           ids, so a repeated batch rewrites the same pack.
 *   `t#<transaction id>`    a pointer: the pack that holds the transaction (`pack`: its key without
 *                           `p#` or `q#`). The detail view and purges start from it.
 *   `u#<user>#<position>`,  lists (`entry`: the call's summary as JSON) of the calls that a filter
 *   `x#<position>`,         would look for among many: a user's (`<user>` hashed when long), the
 *   `b#<mode>#<position>`   failed calls, the BYOK or dual calls (`listsOf`). The user, status and
 *                           billing filters read them instead of every pack, as they read the filter
 *                           indexes before.
 *   `e#<position>`,         written before packs (one entry and one record item per interaction, the
 *   `r#<transaction id>`    entry copied into four filter indexes): still listed, opened, purged and
 *                           expired, and gone within the index's retention (interactions/legacy.ts
 *                           says why they are still read).
 * A managed call that succeeded and names no user is its pointer and a share of a pack: one item and
 * a fiftieth, where it was three (docs/architecture.md, "Packed interactions").
 *
 * A page reads packs in the order of their newest call (or the list its filters name), and the
 * entries written before in their order, merging the two; every filter is applied in memory, within
 * the page's scan budget. Packs of one bucket may overlap in time (a late call, a retry), so a call
 * read is given once no pack yet to read can hold a newer one.
 *
 * Writing a batch, exactly once per transaction however often it is repeated (the consumer repeats a
 * batch whose write failed, and re-sends records it sees again):
 *   w1  read the pointers, and the packs they name: a transaction is indexed once its pointer's
 *       pack summaries exist (written last, after its figures are in the rollups), or its entry
 *       written before packs exists
 *   w2  put the pointers, each naming the pack planned for it       (idempotent)
 *   w3  rollups: add the figures with an `add` marker                (once per marker, rollups.ts), to
 *       the model rollups and the key's and the user's rows, all at once
 *   w4  put the packs' records, the list entries, then the packs' summaries
 *                                                  (idempotent; from now on w1 skips their records)
 *   w5  rollups: remove the `add` markers
 * w2 to w5 run a round at a time: whole packs, up to 100 records (`ROUND_RECORDS`), so that a rollup
 * item carries at most a round's markers for each write in flight, whatever the batch's size.
 * A crash before w3 leaves nothing counted; between w3 and w4 the markers say "counted", so the retry
 * skips the addition and writes a pack (perhaps another one, if the retry's batch differs: the pointer
 * is rewritten to name it); after w4 the pack says it. A pack is only ever written after its pointers,
 * so every pack holding a transaction is in the bucket its pointer names, which a purge reads whole;
 * a transaction in two packs (a slow writer and its retry) is listed once.
 *
 * Purging transactions (deletion): read their pointers, delete their list entries (found in the
 * records), rewrite every pack of their buckets without them (or delete it; records first, then
 * summaries), then delete the pointers; entries written before packs go as before (entry,
 * then record). Safe to repeat. The rollups keep their figures (billing totals outlive a deletion); a
 * user's deletion also moves the user's rows to deleted users' rows (rollups.ts `forgetUser`). A
 * purge racing the consumer's write of the same transaction can leave it listed; deletion stops the
 * consumer writing deleted transactions first (tombstones), which closes that window.
 */
export class DynamoInteractionIndex implements InteractionIndex, RetentionIndex {
  /** As a deletion's copy purger. */
  readonly name = "dashboard index";
  readonly rollups: DynamoUsageRollups;
  private readonly table: IndexTable;

  constructor(db: DynamoDBClient, tables: Pick<TableNames, "interactions" | "usageRollups">) {
    this.rollups = new DynamoUsageRollups(db, tables);
    this.table = new IndexTable(db, tables.interactions);
  }

  /** The consumer's batch (interactions/write.ts). */
  write(records: readonly InteractionRecord[]): Promise<void> {
    return writeRecords(this.table, this.rollups, records);
  }

  /** The dashboard's reads (interactions/read.ts). */
  list(query: InteractionListQuery): Promise<{ interactions: InteractionSummary[]; next?: string }> {
    return listPage(this.table, query);
  }

  get(projectId: string, transactionId: string): Promise<InteractionRecord | undefined> {
    return getRecord(this.table, projectId, transactionId);
  }

  /** Deletion and retention (interactions/purge.ts). */
  purgeUser(projectId: string, userId: string): Promise<number> {
    return purgeUser(this.table, this.rollups, projectId, userId);
  }

  purgeTransactions(projectId: string, transactionIds: readonly string[]): Promise<number> {
    return purgeTransactions(this.table, projectId, transactionIds);
  }

  expire(projectId: string, cutoffs: RetentionCutoffs): Promise<{ removed: number; blanked: number }> {
    return expire(this.table, projectId, cutoffs);
  }
}
