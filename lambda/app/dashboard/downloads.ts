/**
 * The dashboard's export downloads: `POST .../exports` answers a short-lived URL of the file, which the
 * browser follows to save it, never the file in the API's body. In AWS the dashboard API is a buffered
 * HTTP API (6 MB, 29 s), so the function writes the export to S3 and answers a presigned GET of it;
 * locally the URL is a signed link the local server streams the export from. The same answer on both
 * hosts, so the web UI does one thing (docs/aws.md, "Dashboard downloads").
 */
import { createHmac, randomBytes, randomUUID, timingSafeEqual } from "node:crypto";
import { ApiError } from "../../core/errors";
import { dashboardDownloadLimit, type ExportSizeLimit } from "../../core/export-estimate";
import type { ExportRequest } from "../../core/export-request";

/** How long a download URL works: long enough to follow it at once, short enough to leak little. */
export const DOWNLOAD_URL_SECONDS = 300;

/** Where the dashboard's downloads are written in the results bucket (its lifecycle expires them in a day). */
export const DOWNLOAD_PREFIX = "dashboard-downloads/";

/** One export download: the caller's project, the validated request, and the file's name and type. */
export interface DownloadFile {
  projectId: string;
  request: ExportRequest;
  fileName: string;
  contentType: string;
}

export interface PreparedDownload {
  /** Absolute, or relative to the dashboard API's origin (the local server's links). */
  url: string;
  expiresAt: number;
}

export interface DownloadHost {
  /** Makes the file reachable at a short-lived URL; `body` gives its bytes (called at most once). */
  prepare(file: DownloadFile, body: () => AsyncIterable<Uint8Array>): Promise<PreparedDownload>;
  /** The most rows this host prepares at once; absent: no limit (the local server streams any size). */
  limit?: ExportSizeLimit;
  /** For hosts whose links the dashboard API serves: the file a link names, or a refusal. */
  open?(token: string): DownloadFile;
}

/** What the S3 downloads need of a bucket (adapters/s3/object-store.ts). */
export interface PresigningStore {
  put(key: string, body: AsyncIterable<Uint8Array>, contentType: string): Promise<void>;
  downloadUrl(key: string, seconds: number, saveAs: string): Promise<{ url: string; expiresAt: number }>;
}

/**
 * AWS: the export is written (streamed up in parts, constant memory) under `dashboard-downloads/
 * <project>/<random>/` in the results bucket, then handed out as a presigned GET that makes the browser
 * save it under its name. The random segment keeps one download's URL from naming another's object.
 */
export function s3Downloads(store: PresigningStore): DownloadHost {
  return {
    limit: dashboardDownloadLimit,
    async prepare(file, body) {
      const key = `${DOWNLOAD_PREFIX}${file.projectId}/${randomUUID()}/${file.fileName}`;
      await store.put(key, body(), file.contentType);
      return store.downloadUrl(key, DOWNLOAD_URL_SECONDS, file.fileName);
    },
  };
}

/** The path the local server serves signed download links under (outside the token check). */
export const DOWNLOAD_LINK_PATH = "/dashboard/api/downloads";

const refused = () =>
  new ApiError(
    403,
    "permission_error",
    "download_link_invalid",
    "This download link has expired or is not valid: start the download again from Settings.",
  );

/**
 * Locally: a link that carries the request, the project and an expiry, signed with a key of this
 * process (a restart ends every link). Following it streams the export, as the data API does.
 */
export function signedLinkDownloads(clock: () => number = Date.now, key = randomBytes(32)): DownloadHost {
  const mac = (payload: string) => createHmac("sha256", key).update(payload).digest("base64url");
  return {
    async prepare(file) {
      const expiresAt = clock() + DOWNLOAD_URL_SECONDS * 1000;
      const payload = Buffer.from(JSON.stringify({ ...file, expiresAt })).toString("base64url");
      return { url: `${DOWNLOAD_LINK_PATH}/${payload}.${mac(payload)}`, expiresAt };
    },
    open(token) {
      const [payload = "", signature = ""] = token.split(".");
      const expected = Buffer.from(mac(payload));
      const given = Buffer.from(signature);
      if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw refused();
      const { expiresAt, ...file } = JSON.parse(
        Buffer.from(payload, "base64url").toString("utf8"),
      ) as DownloadFile & { expiresAt: number };
      if (clock() >= expiresAt) throw refused();
      return file;
    },
  };
}
