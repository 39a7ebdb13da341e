import type { Context } from "hono";
import type * as z from "zod/mini";
import { type ApiError, errors } from "../../core/errors";
import type { ExportDestination, ExportSettings } from "../../core/export-destination";
import { checkExportSize, streamedExportLimit } from "../../core/export-estimate";
import {
  EXPORT_CONTENT_TYPES,
  exportFailureMarker,
  frameEncodedExport,
  frameExport,
} from "../../core/export-format";
import type {
  EncodedRowSource,
  InteractionQuery,
  UsageGroupSource,
  WarehouseQuery,
} from "../../core/export-query";
import { type ExportRequest, parseExportRequest } from "../../core/export-request";
import { FOCUS_VERSION, focusExport } from "../../core/focus";
import { errorFields, type Logger } from "../../core/logger";
import type { ObjectStore } from "../../core/object-store";
import type { UsageRollups } from "../../core/usage-rollups";
import { DATA_API_BODY_LIMIT, readJsonObject } from "../body";
import type { AppEnv } from "../env";
import type { RouteTable } from "../routing";
import type { bucketExportSchema } from "./openapi";

export interface ExportRouteDeps {
  query: WarehouseQuery & Partial<EncodedRowSource> & UsageGroupSource;
  /** Key ids to names, for FOCUS exports' `x_KeyName`; absent: names left null. */
  keyNames?(projectId: string): Promise<ReadonlyMap<string, string>>;
  settings: ExportSettings;
  /** The store behind a bucket-export destination: S3 in AWS, a folder locally. */
  openDestination(destination: ExportDestination): ObjectStore;
  logger: Logger;
  clock?: () => number;
  /** Lifetime of a bucket export's `download_url` (default one hour). */
  downloadUrlSeconds?: number;
  /** The streaming integration's limit (AWS); absent: a stream may run as long as it takes. */
  timeLimit?: ExportTimeLimit;
  /** The daily rollups, whose call counts tell an export's size before its query (with `timeLimit`). */
  rollups?: Pick<UsageRollups, "query">;
}

const encoder = new TextEncoder();

async function* utf8(chunks: AsyncIterable<string>): AsyncGenerator<Uint8Array> {
  for await (const chunk of chunks) yield encoder.encode(chunk);
}

/** What a streamed export may take: the integration's limit, and the time this invocation has left. */
export interface ExportTimeLimit {
  minutes: number;
  /** Milliseconds left to stream this request; undefined: no limit (the local server). */
  timeLeftMs(c: Context<AppEnv>): number | undefined;
}

/** Time kept at the end of the limit to stop the query and send the marker. */
const TIME_LIMIT_MARGIN_MS = 10_000;

/**
 * A pull-driven stream: the next batch is read from the query only when the client has taken the last
 * one, so memory stays flat however many rows. A client that goes away ends the query. A query that
 * fails, or a stream that reaches `deadline`, ends the body with the format's failure marker (the same
 * on every host), never as a shorter file that parses.
 */
function streamOf(
  first: Uint8Array,
  rest: AsyncIterator<Uint8Array>,
  marker: (error: ApiError) => string,
  deps: { logger: Logger; deadline?: { at: number; minutes: number }; clock: () => number },
): ReadableStream<Uint8Array> {
  let pending: Uint8Array | undefined = first;
  const stop = () => Promise.resolve(rest.return?.()).catch(() => undefined);
  const end = async (controller: ReadableStreamDefaultController<Uint8Array>, error: ApiError) => {
    await stop();
    controller.enqueue(encoder.encode(marker(error)));
    controller.close();
  };
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        if (pending) {
          controller.enqueue(pending);
          pending = undefined;
          return;
        }
        let timer: ReturnType<typeof setTimeout> | undefined;
        try {
          const { deadline } = deps;
          const next = await (deadline
            ? Promise.race([
                rest.next(),
                new Promise<"late">((resolve) => {
                  timer = setTimeout(() => resolve("late"), Math.max(0, deadline.at - deps.clock()));
                }),
              ])
            : rest.next());
          if (next === "late") {
            deps.logger.warn("export reached the streaming time limit", { minutes: deadline?.minutes });
            await end(controller, errors.exportTimeLimit(deadline?.minutes ?? 0));
          } else if (next.done) controller.close();
          else controller.enqueue(next.value);
        } catch (err) {
          // Headers are gone: the body ends with the marker, which no client reads as complete.
          deps.logger.error("export failed while streaming", errorFields(err));
          await end(controller, errors.exportInterrupted());
        } finally {
          clearTimeout(timer);
        }
      },
      async cancel() {
        await stop();
      },
    },
    { highWaterMark: 0 },
  );
}

async function handleExport(c: Context<AppEnv>, deps: ExportRouteDeps): Promise<Response> {
  const request = parseExportRequest(await readJsonObject(c, DATA_API_BODY_LIMIT));
  const projectId = c.get("auth").projectId;
  const query: InteractionQuery = { projectId, ...request.range, filters: request.filters };
  const focus = request.schema === "focus";
  const fileName = `dmt-${focus ? "focus" : "export"}-${projectId}-${request.range.start}-to-${request.range.end}.${request.format}`;
  const contentType = EXPORT_CONTENT_TYPES[request.format];
  const body = focus ? await focusBody(deps, request, query) : interactionBody(deps, request, query);

  const destination = await deps.settings.getExportDestination(projectId);
  const clock = deps.clock ?? Date.now;
  if (destination) {
    const stamp = new Date(clock()).toISOString().replace(/[-:.]/g, "");
    const key = `${destination.prefix}${stamp}-${fileName}`;
    const store = deps.openDestination(destination);
    await store.put(key, body, contentType);
    const download = await store.downloadUrl(key, deps.downloadUrlSeconds ?? 3600);
    return c.json({
      export_url: store.url(key),
      download_url: download.url,
      expires_at: download.expiresAt === null ? null : new Date(download.expiresAt).toISOString(),
    } satisfies z.infer<typeof bucketExportSchema>);
  }

  // An export that could not stream within the limit is refused before its query starts.
  if (deps.timeLimit && deps.rollups && !focus) {
    await checkExportSize(deps.rollups, streamedExportLimit(deps.timeLimit.minutes), query);
  }
  const chunks = body[Symbol.asyncIterator]();
  // The query starts here: a failure before the first rows is still an ordinary error response.
  const first = await chunks.next();
  const timeLeft = deps.timeLimit?.timeLeftMs(c);
  const deadline =
    deps.timeLimit && timeLeft !== undefined
      ? { at: clock() + timeLeft - TIME_LIMIT_MARGIN_MS, minutes: deps.timeLimit.minutes }
      : undefined;
  const stream = streamOf(
    first.done ? new Uint8Array() : first.value,
    chunks,
    (error) => exportFailureMarker(request.format, error.toBody()),
    { logger: deps.logger, clock, ...(deadline && { deadline }) },
  );
  return c.body(stream, 200, {
    "Content-Type": contentType,
    "Content-Disposition": `attachment; filename="${fileName}"`,
    "Cache-Control": "no-store",
    ...(focus && { "X-Focus-Version": FOCUS_VERSION }),
  });
}

function interactionBody(
  deps: ExportRouteDeps,
  request: ExportRequest,
  query: InteractionQuery,
): AsyncIterable<Uint8Array> {
  return deps.query.encodedRows
    ? frameEncodedExport(request.format, deps.query.encodedRows(query, request.format))
    : utf8(frameExport(request.format, deps.query.rows(query, request.format)));
}

/** A FOCUS export is one row per day, model and key: small, so it is aggregated before any byte is sent. */
async function focusBody(
  deps: ExportRouteDeps,
  request: ExportRequest,
  query: InteractionQuery,
): Promise<AsyncIterable<Uint8Array>> {
  const [groups, keyNames] = await Promise.all([
    deps.query.usageGroups(query),
    deps.keyNames?.(query.projectId) ?? new Map<string, string>(),
  ]);
  const text = focusExport(request.format, groups, { projectId: query.projectId, keyNames });
  return utf8(
    (async function* () {
      yield* text;
    })(),
  );
}

/** `POST /api/v1/exports`, for the data API's route table. */
export function exportRoutes(deps: ExportRouteDeps): RouteTable {
  return { "/api/v1/exports": { POST: (c) => handleExport(c, deps) } };
}
