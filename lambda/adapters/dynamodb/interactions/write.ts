import { createHash } from "node:crypto";
import { breakdownKeysOf, breakdownRowId } from "../../../core/breakdowns";
import { groupByRollup } from "../../../core/interactions-usage";
import type { InteractionRecord } from "../../../core/record";
import { breakdownTarget, type DynamoUsageRollups, modelTarget, type RollupTarget } from "../rollups";
import {
  bucketOf,
  digits,
  ENTRIES,
  GC_AFTER_MS,
  listEntryItems,
  newestFirst,
  PACK_BYTES,
  PACK_RECORDS,
  POINTER,
  packItems,
  pointerKey,
  ROUND_RECORDS,
} from "./layout";
import { legacyEntryIdOf, legacyEntryKey } from "./legacy";
import type { IndexTable } from "./table";

/**
 * Writing a batch into the index, w1 to w5 of the protocol in ../interactions.ts: each transaction
 * indexed once however often its batch is repeated, its figures added to the rollups once.
 */

/** The interactions a batch adds to one pack, in order, with their JSON. */
interface PackPlan {
  projectId: string;
  /** `<bucket>#<newest>#<id>`: the pack's sort keys without their kind. */
  key: string;
  records: InteractionRecord[];
  json: string[];
}

/**
 * A batch's records in packs: by project and bucket, newest first, up to PACK_RECORDS or PACK_BYTES of
 * JSON each (a single larger record has a pack of its own). The id hashes the transaction ids.
 */
function planPacks(records: readonly InteractionRecord[]): PackPlan[] {
  const groups = new Map<string, InteractionRecord[]>();
  for (const record of records) {
    const group = `${record.project_id}/${bucketOf(record.started_at)}`;
    const list = groups.get(group);
    if (list) list.push(record);
    else groups.set(group, [record]);
  }
  const plans: PackPlan[] = [];
  for (const list of groups.values()) {
    list.sort(newestFirst);
    let current: Omit<PackPlan, "key"> | undefined;
    let bytes = 0;
    const close = () => {
      if (!current) return;
      const first = current.records[0] as InteractionRecord;
      const id = createHash("sha256")
        .update(current.records.map((r) => r.transaction_id).join("\n"))
        .digest("base64url")
        .slice(0, 22);
      plans.push({
        ...current,
        key: `${digits(bucketOf(first.started_at))}#${digits(first.started_at)}#${id}`,
      });
      current = undefined;
    };
    for (const record of list) {
      const json = JSON.stringify(record);
      if (current && (current.records.length >= PACK_RECORDS || bytes + json.length > PACK_BYTES)) close();
      current ??= { projectId: record.project_id, records: [], json: [] };
      if (current.records.length === 0) bytes = 0;
      current.records.push(record);
      current.json.push(json);
      bytes += json.length;
    }
    close();
  }
  return plans;
}

/** Packs in rounds of whole packs, each round up to ROUND_RECORDS records (a pack holds no more). */
function roundsOf(plans: readonly PackPlan[]): PackPlan[][] {
  const rounds: PackPlan[][] = [];
  let round: PackPlan[] = [];
  let count = 0;
  for (const plan of plans) {
    if (count > 0 && count + plan.records.length > ROUND_RECORDS) {
      rounds.push(round);
      round = [];
      count = 0;
    }
    round.push(plan);
    count += plan.records.length;
  }
  if (round.length > 0) rounds.push(round);
  return rounds;
}

/** Indexes a batch of records (w1 to w5), skipping those already indexed. */
export async function writeRecords(
  table: IndexTable,
  rollups: DynamoUsageRollups,
  records: readonly InteractionRecord[],
): Promise<void> {
  const unique = [...new Map(records.map((r) => [entryId(r), r])).values()];
  const indexed = await indexedAmong(table, unique);
  const fresh = unique.filter((r) => !indexed.has(entryId(r)));
  const stale = unique.filter((r) => indexed.has(entryId(r)));

  for (const round of roundsOf(planPacks(fresh))) await writeRound(table, rollups, round);
  // A repeat of a write that stopped after w4 may have left `add` markers behind.
  await Promise.all(rollupGroups(stale).map((g) => rollups.clear(g.projectId, g.target, ids(g.records))));
}

/** w2 to w5 for the records of these packs. */
async function writeRound(table: IndexTable, rollups: DynamoUsageRollups, plans: readonly PackPlan[]) {
  const records = plans.flatMap((plan) => plan.records);
  await table.batchPut(
    plans.flatMap((plan) =>
      // Object.assign, not a spread: on Node 20 a spread with more properties after it costs ~1 µs.
      plan.records.map((r) =>
        Object.assign(pointerKey(plan.projectId, r.transaction_id), {
          pack: plan.key,
          gcAt: Math.floor((r.started_at + GC_AFTER_MS) / 1000),
        }),
      ),
    ),
  );
  const groups = rollupGroups(records);
  await Promise.all(groups.map((g) => rollups.add(g.projectId, g.target, g.records)));
  const items = plans.map((plan) => packItems(plan.projectId, plan.key, plan.records, plan.json));
  // The records and the list entries first: a pack's summaries say it is complete.
  await table.batchPut(items.map((item) => item.records(1)));
  await table.batchPut(records.flatMap(listEntryItems));
  await table.batchPut(items.map((item) => item.entries(1)));
  await Promise.all(groups.map((g) => rollups.clear(g.projectId, g.target, ids(g.records))));
}

/** w1: `entryId` of the records already indexed: their pointer's pack exists, or their entry written before packs. */
async function indexedAmong(table: IndexTable, records: readonly InteractionRecord[]): Promise<Set<string>> {
  const keys = records.flatMap((r) => [pointerKey(r.project_id, r.transaction_id), legacyEntryKey(r)]);
  const found = await table.batchGet(keys, "projectId, sk, pack");
  const indexed = new Set<string>();
  // The summaries' item of each pack a pointer names, with the transactions that point to it.
  const pointed = new Map<string, { key: { projectId: string; sk: string }; ids: string[] }>();
  for (const item of found) {
    const { projectId, sk } = item as { projectId: string; sk: string };
    const legacy = legacyEntryIdOf(projectId, sk);
    if (legacy !== undefined) {
      indexed.add(legacy);
      continue;
    }
    const key = { projectId, sk: ENTRIES + (item.pack as string) };
    const pack = pointed.get(`${projectId}/${key.sk}`) ?? { key, ids: [] };
    pack.ids.push(`${projectId}/${sk.slice(POINTER.length)}`);
    pointed.set(`${projectId}/${key.sk}`, pack);
  }
  const packs = await table.batchGet(
    [...pointed.values()].map((pack) => pack.key),
    "projectId, sk",
  );
  for (const pack of packs) {
    for (const id of pointed.get(`${pack.projectId}/${pack.sk}`)?.ids ?? []) indexed.add(id);
  }
  return indexed;
}

const ids = (records: readonly InteractionRecord[]) => records.map((r) => r.transaction_id);

/** Project and transaction: unique across projects (a project id has no `/`). */
function entryId(record: InteractionRecord): string {
  return `${record.project_id}/${record.transaction_id}`;
}

/**
 * Records grouped by project and rollup item (the model rollup, the key's row, the user's row): one
 * counter update per group.
 */
function rollupGroups(records: readonly InteractionRecord[]) {
  const byProject = new Map<string, InteractionRecord[]>();
  for (const record of records) {
    const list = byProject.get(record.project_id);
    if (list) list.push(record);
    else byProject.set(record.project_id, [record]);
  }
  return [...byProject].flatMap(([projectId, list]) => {
    const groups: { projectId: string; target: RollupTarget; records: InteractionRecord[] }[] = [
      ...groupByRollup(list).values(),
    ].map((group) => ({ projectId, target: modelTarget(group.key), records: group.records }));
    const rows = new Map<string, { projectId: string; target: RollupTarget; records: InteractionRecord[] }>();
    for (const record of list) {
      for (const key of breakdownKeysOf(record)) {
        const id = breakdownRowId(key);
        const group = rows.get(id);
        if (group) group.records.push(record);
        else rows.set(id, { projectId, target: breakdownTarget(key), records: [record] });
      }
    }
    return [...groups, ...rows.values()];
  });
}
