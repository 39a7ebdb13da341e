import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoExportSettings } from "../../lambda/adapters/dynamodb/export-settings";
import { FileExportSettings } from "../../lambda/adapters/fs/export-settings";
import type { ExportSettingsStore } from "../../lambda/core/export-destination";
import { DestinationError, parseExportDestination } from "../../lambda/core/export-destination";
import { type LocalStore, openLocalStore } from "../../lambda/local/store";

// The export-settings port's cases, against each of its adapters: the file the local stack keeps,
// and the projectSettings table Lambda reads (over dynalite).
const dir = mkdtempSync(join(tmpdir(), "dmt-export-settings-"));
let local: LocalStore;

beforeAll(async () => {
  local = await openLocalStore(join(dir, "store"));
});

afterAll(async () => {
  await local?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe.each<[string, () => ExportSettingsStore]>([
  ["FileExportSettings", () => new FileExportSettings(join(dir, "export-settings.json"))],
  [
    "DynamoExportSettings over dynalite",
    () => new DynamoExportSettings(local.db, local.tables.projectSettings),
  ],
])("export settings contract: %s", (_name, open) => {
  const bucket = "s3://dmt-exports-contract/team-a/";

  it("has no destination for a project never set", async () => {
    expect(await open().getExportDestination("never-set")).toBeUndefined();
  });

  it("keeps each project's destination, the latest one set, until it is cleared", async () => {
    const settings = open();
    await settings.setExportDestination("p-one", bucket);
    await settings.setExportDestination("p-two", "s3://dmt-exports-other");
    expect(await settings.getExportDestination("p-one")).toEqual(parseExportDestination(bucket));
    await settings.setExportDestination("p-one", "s3://dmt-exports-contract/team-b/");
    expect(await open().getExportDestination("p-one")).toMatchObject({
      kind: "s3",
      bucket: "dmt-exports-contract",
      prefix: "team-b/",
    });
    await settings.setExportDestination("p-one", undefined);
    expect(await open().getExportDestination("p-one")).toBeUndefined();
    expect(await open().getExportDestination("p-two")).toMatchObject({
      kind: "s3",
      bucket: "dmt-exports-other",
    });
  });

  it("refuses a malformed destination and keeps the one it had", async () => {
    const settings = open();
    await settings.setExportDestination("p-three", bucket);
    await expect(settings.setExportDestination("p-three", "s3://Not_A_Bucket/")).rejects.toThrow(
      DestinationError,
    );
    expect(await settings.getExportDestination("p-three")).toEqual(parseExportDestination(bucket));
  });
});
