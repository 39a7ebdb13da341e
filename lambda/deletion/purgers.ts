/**
 * Purgers of the copies of interaction data that live in files: bucket exports, Athena query results
 * and (locally) dead letters. A file that holds a matching row of the project is deleted whole: it is
 * a snapshot someone asked for, and an export made again after the deletion is the clean one.
 */

import type { CopyPurger } from "../core/deletion";
import type { ExportDestination, ExportSettings } from "../core/export-destination";
import type { ObjectStore } from "../core/object-store";
import { DEAD_LETTER_PREFIX } from "../core/queue";

type Row = Record<string, unknown>;
type RowMatcher = (row: Row) => boolean;

/** Text a spreadsheet would run as a formula: CSV exports store it with a leading `'` (export-format.ts). */
const FORMULA_START = /^[=+\-@\t\r]/;

function userMatcher(projectId: string, userId: string): RowMatcher {
  const neutralised = FORMULA_START.test(userId) ? `'${userId}` : undefined;
  return (row) => row.project_id === projectId && (row.user_id === userId || row.user_id === neutralised);
}

function transactionMatcher(projectId: string, transactionIds: readonly string[]): RowMatcher {
  const ids = new Set(transactionIds);
  return (row) =>
    row.project_id === projectId && typeof row.transaction_id === "string" && ids.has(row.transaction_id);
}

/** RFC 4180 records (quoted cells may hold commas, quotes and line breaks). */
export function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let cell = "";
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (quoted) {
      if (ch !== '"') cell += ch;
      else if (text[i + 1] === '"') {
        cell += '"';
        i++;
      } else quoted = false;
    } else if (ch === '"') quoted = true;
    else if (ch === ",") {
      row.push(cell);
      cell = "";
    } else if (ch === "\n" || ch === "\r") {
      if (ch === "\r" && text[i + 1] === "\n") i++;
      row.push(cell);
      rows.push(row);
      row = [];
      cell = "";
    } else cell += ch;
  }
  if (cell !== "" || row.length > 0) {
    row.push(cell);
    rows.push(row);
  }
  return rows;
}

/** The rows of a JSON array or a CSV file with a header row, by column name. */
export function tableRows(bytes: Uint8Array, format: "json" | "csv"): Row[] {
  const text = new TextDecoder().decode(bytes);
  if (format === "json") {
    try {
      const parsed: unknown = JSON.parse(text);
      return Array.isArray(parsed) ? parsed.filter((r): r is Row => typeof r === "object" && r !== null) : [];
    } catch {
      return [];
    }
  }
  const [header, ...records] = parseCsv(text);
  if (!header) return [];
  return records.map((cells) => Object.fromEntries(header.map((name, i) => [name, cells[i]])));
}

/** Deletes each listed file that holds a matching row (and its companions); returns how many. */
async function purgeFiles(
  store: ObjectStore,
  keys: { key: string; format: "json" | "csv"; companions?: string[] }[],
  matches: RowMatcher,
): Promise<number> {
  let removed = 0;
  for (const { key, format, companions } of keys) {
    const bytes = await store.get(key);
    if (!bytes || !tableRows(bytes, format).some(matches)) continue;
    await store.delete(key);
    for (const companion of companions ?? []) await store.delete(companion);
    removed++;
  }
  return removed;
}

async function listKeys(store: ObjectStore, prefix: string): Promise<string[]> {
  const keys: string[] = [];
  for await (const object of store.list(prefix)) keys.push(object.key);
  return keys;
}

/**
 * Bucket exports of the project (`<prefix><stamp>-dmt-export-<project>-<range>.<format>`, app/data-api/exports.ts)
 * at its current destination. Exports made to an earlier destination are out of reach (docs/deletion.md).
 */
export class ExportFilesPurger implements CopyPurger {
  readonly name = "bucket exports";

  constructor(
    private readonly settings: ExportSettings,
    private readonly openDestination: (destination: ExportDestination) => ObjectStore,
  ) {}

  purgeUser(projectId: string, userId: string): Promise<number> {
    return this.purge(projectId, userMatcher(projectId, userId));
  }

  purgeTransactions(projectId: string, transactionIds: readonly string[]): Promise<number> {
    return this.purge(projectId, transactionMatcher(projectId, transactionIds));
  }

  private async purge(projectId: string, matches: RowMatcher): Promise<number> {
    const destination = await this.settings.getExportDestination(projectId);
    if (!destination) return 0;
    const store = this.openDestination(destination);
    const marker = `-dmt-export-${projectId}-`;
    const files = (await listKeys(store, destination.prefix)).flatMap((key) => {
      const name = key.slice(key.lastIndexOf("/") + 1);
      const format = name.endsWith(".json") ? "json" : name.endsWith(".csv") ? "csv" : undefined;
      return format && name.includes(marker) ? [{ key, format } as const] : [];
    });
    return purgeFiles(store, files, matches);
  }
}

/**
 * Athena's query results (`<query id>.csv` and its `.csv.metadata`) and the dashboard's downloads
 * (`dashboard-downloads/...csv|json`): they hold an export's rows until the bucket's lifecycle removes them. Results of other projects never match (`project_id`).
 */
export class QueryResultsPurger implements CopyPurger {
  readonly name = "query results";

  constructor(
    private readonly results: ObjectStore,
    private readonly prefix = "",
  ) {}

  purgeUser(projectId: string, userId: string): Promise<number> {
    return this.purge(userMatcher(projectId, userId));
  }

  purgeTransactions(projectId: string, transactionIds: readonly string[]): Promise<number> {
    return this.purge(transactionMatcher(projectId, transactionIds));
  }

  private async purge(matches: RowMatcher): Promise<number> {
    // The dashboard's downloads (app/dashboard/downloads.ts) are beside them, CSV or JSON.
    type File = { key: string; format: "csv" | "json"; companions?: string[] };
    const files = (await listKeys(this.results, this.prefix)).flatMap((key): File[] =>
      key.endsWith(".csv")
        ? [{ key, format: "csv", companions: [`${key}.metadata`] }]
        : key.endsWith(".json")
          ? [{ key, format: "json" }]
          : [],
    );
    return purgeFiles(this.results, files, matches);
  }
}

/** The local dead letters (`dead-letter/<day>/<message id>.json`), which keep whole records. */
export class DeadLetterPurger implements CopyPurger {
  readonly name = "dead letters";

  constructor(private readonly objects: ObjectStore) {}

  purgeUser(projectId: string, userId: string): Promise<number> {
    return this.purge(userMatcher(projectId, userId));
  }

  purgeTransactions(projectId: string, transactionIds: readonly string[]): Promise<number> {
    return this.purge(transactionMatcher(projectId, transactionIds));
  }

  private async purge(matches: RowMatcher): Promise<number> {
    let removed = 0;
    for (const key of await listKeys(this.objects, DEAD_LETTER_PREFIX)) {
      const bytes = await this.objects.get(key);
      if (!bytes) continue;
      let record: unknown;
      try {
        record = JSON.parse(JSON.parse(new TextDecoder().decode(bytes)).body);
      } catch {
        // A letter whose body is not a JSON record names no user we could match.
        continue;
      }
      if (typeof record !== "object" || record === null || !matches(record as Row)) continue;
      await this.objects.delete(key);
      removed++;
    }
    return removed;
  }
}
