import { randomUUID } from "node:crypto";
import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import {
  type ExportDestination,
  type ExportSettings,
  parseExportDestination,
} from "../../core/export-destination";

interface SettingsFile {
  projects: Record<string, { export_destination?: string }>;
}

/**
 * Bucket-export settings of the local stack: a JSON file under the data dir
 * (`{"projects": {"<id>": {"export_destination": "s3://bucket/prefix/"}}}`), read on every export so a
 * change made by the CLI applies at once.
 */
export class FileExportSettings implements ExportSettings {
  constructor(readonly file: string) {}

  private async read(): Promise<SettingsFile> {
    try {
      return JSON.parse(await readFile(this.file, "utf8")) as SettingsFile;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return { projects: {} };
      throw err;
    }
  }

  async getExportDestination(projectId: string): Promise<ExportDestination | undefined> {
    const url = (await this.read()).projects[projectId]?.export_destination;
    return url === undefined ? undefined : parseExportDestination(url);
  }

  /** Sets (or with `undefined` clears) a project's destination; a malformed URL throws DestinationError. */
  async setExportDestination(projectId: string, url: string | undefined): Promise<void> {
    const settings = await this.read();
    const project = { ...settings.projects[projectId] };
    if (url === undefined) delete project.export_destination;
    else project.export_destination = parseExportDestination(url).url;
    settings.projects[projectId] = project;
    await mkdir(dirname(this.file), { recursive: true });
    const temp = `${this.file}.${randomUUID()}.partial`;
    await writeFile(temp, `${JSON.stringify(settings, null, 2)}\n`);
    await rename(temp, this.file);
  }
}
