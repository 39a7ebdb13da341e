import type { Dirent } from "node:fs";
import { copyFile, link, mkdir, mkdtemp, readdir, rm, stat } from "node:fs/promises";
import { dirname, join, relative, sep } from "node:path";
import { isCompactedFile } from "../../core/compaction";

/**
 * A local query's read snapshot (docs/warehouse.md, "Readers during a swap"): the Parquet files of
 * its day folders, hard-linked into a folder of its own before DuckDB opens any. Compaction, a
 * deletion or the retention run may then remove or replace a warehouse file (unlink, rename over): the
 * query's link keeps the file it listed, so DuckDB never meets a file that vanished after the listing.
 *
 * A listing is not one instant: a folder read while a swap puts its merged file and removes the inputs
 * may miss both the merged file (made after the read passed its place) and inputs (removed before the
 * read reached them). Inputs go only after their merged file exists, so a snapshot is kept only when a
 * second listing, after every link, shows no compacted file the first one lacked; otherwise it is taken
 * again. An input that vanished before its link is left out: its rows are in a merged file the snapshot
 * holds (or the check above fails), or a deletion or the retention run removed them for good.
 */

/** The folder calls a snapshot makes, so a test can put a swap between two of them. */
export interface SnapshotFolder {
  readdir(path: string): Promise<Dirent[]>;
  link(existing: string, newPath: string): Promise<void>;
}

export const nodeFolder: SnapshotFolder = {
  readdir: (path) => readdir(path, { withFileTypes: true }),
  link,
};

export interface ReadSnapshot {
  /** The snapshot's folder, laid out as the warehouse folder: a file's path below it is its key. */
  root: string;
  /** The linked Parquet files, by key. */
  files: string[];
  /** Removes the links; a query calls it once DuckDB is done with the files. */
  release(): Promise<void>;
}

/** Under the warehouse folder (hard links stay on one file system); no object key starts with a dot. */
export const READERS_FOLDER = ".readers";
/** Snapshots taken again at most this often before the query fails (a compaction finishes a merge a minute). */
const ATTEMPTS = 10;
/** Links made at once. */
const LINK_CONCURRENCY = 16;
/** A snapshot left this long is a query's that never released it (a killed process). */
const STALE_MS = 86_400_000;

export class ReadSnapshots {
  private readonly readers: string;

  constructor(
    private readonly root: string,
    private readonly folder: SnapshotFolder = nodeFolder,
  ) {
    this.readers = join(root, READERS_FOLDER);
  }

  /**
   * The Parquet files of `dayFolders` (absolute paths of `dt=` folders under the root), linked. Empty
   * (no folder made) when there are none.
   */
  async take(dayFolders: readonly string[]): Promise<ReadSnapshot> {
    for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
      const listed = await this.parquetFiles(dayFolders);
      if (listed.length === 0) return { root: this.root, files: [], release: async () => {} };
      await mkdir(this.readers, { recursive: true });
      const dir = await mkdtemp(join(this.readers, `${process.pid}-`));
      const release = () => rm(dir, { recursive: true, force: true }).catch(() => undefined);
      try {
        const files = await this.linkAll(listed, dir);
        const known = new Set(listed);
        const again = await this.parquetFiles(dayFolders);
        if (again.every((file) => !isCompactedFile(file) || known.has(file))) {
          return { root: dir, files, release };
        }
      } catch (err) {
        await release();
        throw err;
      }
      // A merged file appeared while the folders were read: its inputs may have been missed.
      await release();
    }
    throw new Error("the warehouse's day folders kept changing while a query listed them");
  }

  /**
   * Removes the snapshots of processes that ended, and any older than a day. Another process's
   * snapshots in use stay: each is named after its process.
   */
  async sweep(): Promise<void> {
    let entries: Dirent[];
    try {
      entries = await readdir(this.readers, { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of entries) {
      const path = join(this.readers, entry.name);
      const pid = Number(entry.name.split("-")[0]);
      const stale =
        !Number.isInteger(pid) ||
        (pid !== process.pid && !alive(pid)) ||
        Date.now() - ((await stat(path).catch(() => undefined))?.mtimeMs ?? 0) > STALE_MS;
      if (stale) await rm(path, { recursive: true, force: true }).catch(() => undefined);
    }
  }

  private async parquetFiles(dayFolders: readonly string[]): Promise<string[]> {
    const files: string[] = [];
    for (const day of dayFolders) {
      let entries: Dirent[];
      try {
        entries = await this.folder.readdir(day);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === "ENOENT") continue;
        throw err;
      }
      for (const entry of entries) {
        if (entry.isFile() && entry.name.endsWith(".parquet")) files.push(join(day, entry.name));
      }
    }
    return files.sort();
  }

  /** Links each file into `dir` at its key; a file gone meanwhile is left out. */
  private async linkAll(listed: string[], dir: string): Promise<string[]> {
    const linked: (string | undefined)[] = new Array(listed.length);
    const folders = new Set<string>();
    let next = 0;
    const worker = async () => {
      for (let i = next++; i < listed.length; i = next++) {
        const from = listed[i] as string;
        const to = join(dir, relative(this.root, from));
        const folder = dirname(to);
        if (!folders.has(folder)) {
          await mkdir(folder, { recursive: true });
          folders.add(folder);
        }
        linked[i] = (await this.linkOne(from, to)) ? to : undefined;
      }
    };
    await Promise.all(Array.from({ length: LINK_CONCURRENCY }, worker));
    return linked.filter((file): file is string => file !== undefined);
  }

  private async linkOne(from: string, to: string): Promise<boolean> {
    try {
      await this.folder.link(from, to);
      return true;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === "ENOENT") return false;
      // A file system without hard links: a copy is a snapshot too, at the cost of the bytes.
      if (code === "EPERM" || code === "ENOTSUP" || code === "EOPNOTSUPP" || code === "EXDEV") {
        try {
          await copyFile(from, to);
          return true;
        } catch (copyErr) {
          if ((copyErr as NodeJS.ErrnoException).code === "ENOENT") return false;
          throw copyErr;
        }
      }
      throw err;
    }
  }
}

/** A snapshot file's warehouse key (`interactions/project=…/dt=…/name.parquet`). */
export function keyIn(snapshot: ReadSnapshot, file: string): string {
  return relative(snapshot.root, file).split(sep).join("/");
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists, under another user.
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}
