import type { Context } from "hono";
import { z } from "zod";
import { errors } from "../../core/errors";
import {
  DestinationError,
  type ExportSettingsStore,
  parseExportDestination,
} from "../../core/export-destination";
import { checkExportSize } from "../../core/export-estimate";
import { EXPORT_CONTENT_TYPES, frameExport } from "../../core/export-format";
import type { WarehouseQuery } from "../../core/export-query";
import { parseExportRequest } from "../../core/export-request";
import { errorFields, type Logger } from "../../core/logger";
import { isTier, TIERS } from "../../core/model";
import type { ProjectTiers } from "../../core/ports";
import type { UsageRollups } from "../../core/usage-rollups";
import { DATA_API_BODY_LIMIT, readJsonObject } from "../body";
import type { AppEnv } from "../env";
import type { RouteTable } from "../routing";
import type { DownloadFile, DownloadHost } from "./downloads";
import { parseBody, projectOf, requireOperator } from "./requests";

export interface SettingsRoutesDeps {
  exportSettings: ExportSettingsStore;
  tiers: ProjectTiers;
  /** The warehouse's query layer, the one `POST /api/v1/exports` reads through. */
  warehouse: WarehouseQuery;
  /** Where export downloads are made reachable: S3 in AWS, signed links locally (./downloads.ts). */
  downloads: DownloadHost;
  /** The daily rollups, whose call counts tell a download's size before its query (a host with a limit). */
  rollups?: Pick<UsageRollups, "query">;
  logger: Logger;
}

const BODY_LIMIT = 64 * 1024;
const destinationBody = z.strictObject({ url: z.string() });
const tierBody = z.strictObject({ tier: z.string() });

const encoder = new TextEncoder();

/**
 * A pull-driven body: the next batch is read from the warehouse only when the client took the last
 * one, so memory stays flat however large the export; a client that goes away ends the query.
 */
function pullStream(
  first: string | undefined,
  rest: AsyncIterator<string>,
  logger: Logger,
): ReadableStream<Uint8Array> {
  let pending = first;
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        if (pending !== undefined) {
          controller.enqueue(encoder.encode(pending));
          pending = undefined;
          return;
        }
        try {
          const next = await rest.next();
          if (next.done) controller.close();
          else controller.enqueue(encoder.encode(next.value));
        } catch (err) {
          // The status is sent: cutting the body short is how a client learns it is incomplete.
          logger.error("dashboard export failed while streaming", errorFields(err));
          throw err;
        }
      },
      async cancel() {
        await rest.return?.();
      },
    },
    { highWaterMark: 0 },
  );
}

/** Settings: the bucket-export destination, the project's tier (operators), and data export downloads. */
export function settingsRoutes(base: string, deps: SettingsRoutesDeps): RouteTable {
  return {
    [`${base}/export-destination`]: {
      GET: async (c) => {
        const destination = await deps.exportSettings.getExportDestination(projectOf(c));
        return c.json({ exportDestination: destination ? { url: destination.url } : null });
      },
      PUT: async (c) => {
        const { url } = parseBody(destinationBody, await readJsonObject(c, BODY_LIMIT));
        const projectId = projectOf(c);
        // Saving the field empty removes the destination, as DELETE does.
        if (url.trim() === "") {
          await deps.exportSettings.setExportDestination(projectId, undefined);
          return c.json({ exportDestination: null });
        }
        try {
          const parsed = parseExportDestination(url.trim());
          // The host's settings decide what it can write to: a folder (file:///path) locally, where
          // the dashboard's user runs the server; only s3:// in AWS (DynamoExportSettings refuses it).
          await deps.exportSettings.setExportDestination(projectId, parsed.url);
          return c.json({ exportDestination: { url: parsed.url } });
        } catch (err) {
          if (err instanceof DestinationError) throw errors.invalidField("url", `${err.message}.`);
          throw err;
        }
      },
      DELETE: async (c) => {
        await deps.exportSettings.setExportDestination(projectOf(c), undefined);
        return c.json({ exportDestination: null });
      },
    },
    [`${base}/tier`]: {
      PUT: async (c) => {
        requireOperator(c, "change a project's tier");
        const { tier } = parseBody(tierBody, await readJsonObject(c, BODY_LIMIT));
        if (!isTier(tier)) throw errors.invalidField("tier", `must be one of ${TIERS.join(", ")}.`);
        const project = await deps.tiers.setTier(projectOf(c), tier);
        if (!project) throw errors.notFound(`Project '${projectOf(c)}' was not found.`);
        return c.json({ project: { projectId: project.projectId, tier: project.tier } });
      },
    },
    [`${base}/exports`]: {
      // The same request and rows as `POST /api/v1/exports`, answered as a short-lived download URL.
      POST: async (c) => {
        const request = parseExportRequest(await readJsonObject(c, DATA_API_BODY_LIMIT));
        if (request.schema !== "interactions") {
          // Never a silent interaction export for a FOCUS request.
          throw errors.invalidField(
            "schema",
            "the dashboard downloads interaction rows; FOCUS exports are POST /api/v1/exports.",
          );
        }
        const projectId = projectOf(c);
        const { downloads } = deps;
        // A download the host could not prepare in time is refused before its query starts.
        if (downloads.limit && deps.rollups) {
          await checkExportSize(deps.rollups, downloads.limit, {
            projectId,
            ...request.range,
            filters: request.filters,
          });
        }
        const file: DownloadFile = {
          projectId,
          request,
          fileName: `dmt-export-${projectId}-${request.range.start}-to-${request.range.end}.${request.format}`,
          contentType: EXPORT_CONTENT_TYPES[request.format],
        };
        const prepared = await downloads.prepare(file, () => utf8(exportText(deps.warehouse, file)));
        return c.json({
          download_url: new URL(prepared.url, c.req.url).href,
          file_name: file.fileName,
          expires_at: new Date(prepared.expiresAt).toISOString(),
        });
      },
    },
  };
}

/** The export's text, framed as `POST /api/v1/exports` frames it. */
function exportText(warehouse: WarehouseQuery, file: DownloadFile): AsyncIterable<string> {
  const { request } = file;
  const rows = warehouse.rows(
    { projectId: file.projectId, ...request.range, filters: request.filters },
    request.format,
  );
  return frameExport(request.format, rows);
}

async function* utf8(chunks: AsyncIterable<string>): AsyncGenerator<Uint8Array> {
  for await (const chunk of chunks) yield encoder.encode(chunk);
}

/**
 * `GET /dashboard/api/downloads/<link>`: the local server's download links, followed by the browser
 * without the access token (the link is the grant, bound to its project and request, minutes long).
 */
export function downloadLinkHandler(deps: Pick<SettingsRoutesDeps, "downloads" | "warehouse" | "logger">) {
  return async (c: Context<AppEnv>): Promise<Response> => {
    const open = deps.downloads.open;
    if (!open) throw errors.notFound("No such download.");
    const file = open(c.req.param("token") ?? "");
    const chunks = exportText(deps.warehouse, file)[Symbol.asyncIterator]();
    // The query starts here: a failure before the first rows is still an ordinary error response.
    const first = await chunks.next();
    return c.body(pullStream(first.done ? undefined : first.value, chunks, deps.logger), 200, {
      "Content-Type": file.contentType,
      "Content-Disposition": `attachment; filename="${file.fileName}"`,
    });
  };
}
