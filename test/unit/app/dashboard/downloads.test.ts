import { describe, expect, it } from "vitest";
import {
  DOWNLOAD_URL_SECONDS,
  type DownloadFile,
  signedLinkDownloads,
} from "../../../../lambda/app/dashboard/downloads";
import { ApiError } from "../../../../lambda/core/errors";

const file: DownloadFile = {
  projectId: "acme",
  request: {
    format: "csv",
    schema: "interactions",
    range: { start: "2026-01-01", end: "2026-01-02" },
    filters: {},
  },
  fileName: "dmt-export-acme-2026-01-01-to-2026-01-02.csv",
  contentType: "text/csv; charset=utf-8",
};

/** A link is streamed when followed, never written up front. */
const unused = (): never => {
  throw new Error("the body was read");
};

const tokenOf = (url: string) => url.slice(url.lastIndexOf("/") + 1);

describe("the local server's signed download links", () => {
  it("open to the file they were made for until they expire, five minutes on", async () => {
    let now = Date.UTC(2026, 11, 7, 9, 0, 0);
    const host = signedLinkDownloads(() => now);
    const prepared = await host.prepare(file, unused);
    expect(prepared.expiresAt).toBe(now + DOWNLOAD_URL_SECONDS * 1000);
    expect(DOWNLOAD_URL_SECONDS).toBe(300);
    expect(host.open?.(tokenOf(prepared.url))).toEqual(file);

    now = prepared.expiresAt - 1;
    expect(host.open?.(tokenOf(prepared.url))).toEqual(file);
    now = prepared.expiresAt;
    expect(() => host.open?.(tokenOf(prepared.url))).toThrow(ApiError);
  });

  it("are refused by another process (a restart) and when edited", async () => {
    const host = signedLinkDownloads();
    const token = tokenOf((await host.prepare(file, unused)).url);
    expect(() => signedLinkDownloads().open?.(token)).toThrow(/expired or is not valid/);
    const [payload = "", signature = ""] = token.split(".");
    const other = Buffer.from(
      Buffer.from(payload, "base64url").toString().replace('"acme"', '"other"'),
    ).toString("base64url");
    expect(() => host.open?.(`${other}.${signature}`)).toThrow(/expired or is not valid/);
  });
});
