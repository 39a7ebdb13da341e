/**
 * The manifest of a deletion round: the files the find step's one query named, written once to the
 * warehouse's object store as JSON Lines (`{"key":…,"rows":…}` a line). In AWS the Distributed Map's
 * ItemReader reads it from S3 (lib/deletion.ts); locally the runner reads the same object
 * (lambda/deletion/runner.ts). Only the key travels in the workflow's state, so neither the state's
 * 256 KB nor the parent execution's history grows with the number of files.
 */
import type { AffectedFile } from "./deletion";
import { PROJECT_ID_PATTERN } from "./model";

/** Under the warehouse bucket (beside `interactions/`, outside the table Athena reads). */
export const DELETION_MANIFEST_PREFIX = "deletion-manifests/";

/** One manifest per request and verification round: a re-run of the step overwrites its own round. */
export function deletionManifestKey(projectId: string, requestId: string, round: number): string {
  if (!PROJECT_ID_PATTERN.test(projectId)) throw new Error("invalid project id");
  return `${DELETION_MANIFEST_PREFIX}project=${projectId}/${requestId}/round-${round}.jsonl`;
}

export function encodeDeletionManifest(files: readonly AffectedFile[]): Uint8Array {
  return new TextEncoder().encode(
    files.map((f) => `${JSON.stringify({ key: f.key, rows: f.rows })}\n`).join(""),
  );
}

/** The items of a manifest; a line that is not one of ours is an error (never a silently skipped file). */
export function parseDeletionManifest(bytes: Uint8Array): AffectedFile[] {
  const items: AffectedFile[] = [];
  const lines = new TextDecoder().decode(bytes).split("\n");
  lines.forEach((line, i) => {
    if (line === "") return;
    const item = JSON.parse(line) as Partial<AffectedFile>;
    if (typeof item?.key !== "string" || typeof item.rows !== "number") {
      throw new Error(`deletion manifest line ${i + 1} is not {"key","rows"}`);
    }
    items.push({ key: item.key, rows: item.rows });
  });
  return items;
}
