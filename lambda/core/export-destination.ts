/**
 * Bucket export: a project may have its exports written to a bucket instead of streamed back. The
 * specification shows `gs://` because its first deployment ran on another cloud; in AWS the destination
 * is `s3://bucket/prefix`, and locally a folder (`file:///abs/path`).
 */

export type ExportDestination =
  | { kind: "s3"; url: string; bucket: string; prefix: string }
  | { kind: "file"; url: string; path: string; prefix: "" };

/** The settings port: where a project's exports go, if anywhere. */
export interface ExportSettings {
  getExportDestination(projectId: string): Promise<ExportDestination | undefined>;
}

/** Where exports go: the local settings file, or the `projectSettings` table in AWS. */
export interface ExportSettingsStore extends ExportSettings {
  /** Sets, or with `undefined` clears; a malformed URL throws DestinationError. */
  setExportDestination(projectId: string, url: string | undefined): Promise<void>;
}

const BUCKET = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;
const PREFIX_SEGMENT = /^[A-Za-z0-9!_.*'()=@+,-]+$/;

export class DestinationError extends Error {
  override name = "DestinationError";
}

/** Parses `s3://bucket[/prefix/]` or `file:///absolute/folder`; throws DestinationError saying what is wrong. */
export function parseExportDestination(url: string): ExportDestination {
  if (url.startsWith("s3://")) {
    const rest = url.slice("s3://".length);
    const slash = rest.indexOf("/");
    const bucket = slash === -1 ? rest : rest.slice(0, slash);
    if (!BUCKET.test(bucket) || bucket.includes("..")) {
      throw new DestinationError(`'${bucket}' is not an S3 bucket name`);
    }
    const segments =
      slash === -1
        ? []
        : rest
            .slice(slash + 1)
            .split("/")
            .filter(Boolean);
    for (const segment of segments) {
      if (!PREFIX_SEGMENT.test(segment) || segment === "." || segment === "..") {
        throw new DestinationError(`'${segment}' is not allowed in an export prefix`);
      }
    }
    const prefix = segments.length > 0 ? `${segments.join("/")}/` : "";
    return { kind: "s3", url: `s3://${bucket}/${prefix}`, bucket, prefix };
  }
  if (url.startsWith("file://")) {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw new DestinationError(`'${url}' is not a file URL`);
    }
    const path = decodeURIComponent(parsed.pathname);
    // URL resolves `..` (file:///tmp/../etc is /etc): a destination names its folder as it is.
    const typed = url.slice("file://".length).split("/");
    const dotted = typed.some((s) => {
      const segment = s.toLowerCase().replaceAll("%2e", ".");
      return segment === ".." || segment === ".";
    });
    if (parsed.host !== "" || !path.startsWith("/") || dotted) {
      throw new DestinationError("a file destination is an absolute local folder, file:///path");
    }
    return { kind: "file", url: parsed.href, path, prefix: "" };
  }
  throw new DestinationError("an export destination is s3://bucket/prefix (or file:///folder locally)");
}
