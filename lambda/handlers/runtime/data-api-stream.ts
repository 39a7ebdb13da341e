import type { APIGatewayProxyEvent, StreamifyHandler } from "aws-lambda";
import type { Hono } from "hono";
import { streamHandle } from "hono/aws-lambda";
import type { AppEnv } from "../../app/env";
import { errorFields, type Logger } from "../../core/logger";
import type { LambdaTelemetry } from "./telemetry";

export type DataApiHandler = StreamifyHandler<APIGatewayProxyEvent, void>;

type Fetch = Hono<AppEnv>["fetch"];

/**
 * The data API behind API Gateway's streaming Lambda proxy integration: hono's `streamHandle` (the
 * same event-to-request translation as the buffered `handle`, so every route answers as before), with
 * the response body held here. A client that leaves (the response stream closes before it finished)
 * cancels the body, which stops an export's query; a body that fails ends the stream where it is (an
 * export has already written its failure marker) instead of `streamHandle` appending its own
 * "Internal Server Error" text.
 */
export function streamingDataApi(
  app: { fetch: Fetch },
  deps: { logger: Logger; telemetry?: Pick<LambdaTelemetry, "begin" | "end"> },
): DataApiHandler {
  return async (event, responseStream, context) => {
    deps.telemetry?.begin(context);
    let reader: ReadableStreamDefaultReader<Uint8Array> | undefined;
    let cancelled: Promise<void> | undefined;
    const left = () => {
      if (responseStream.writableFinished || !reader) return;
      cancelled ??= reader.cancel().catch(() => undefined);
    };
    responseStream.on("close", left);
    responseStream.on("error", left);
    const held: { fetch: Fetch } = {
      async fetch(request, env) {
        const response = await app.fetch(request, env);
        if (!response.body) return response;
        const source = response.body.getReader();
        reader = source;
        if (responseStream.destroyed) left();
        const body = new ReadableStream<Uint8Array>(
          {
            async pull(controller) {
              try {
                const next = await source.read();
                if (next.done) controller.close();
                else controller.enqueue(next.value);
              } catch (err) {
                deps.logger.error("response body failed while streaming", errorFields(err));
                controller.close();
              }
            },
            cancel: (reason) => source.cancel(reason),
          },
          { highWaterMark: 0 },
        );
        return new Response(body, { status: response.status, headers: response.headers });
      },
    };
    try {
      // One per invocation: the held body is this request's (Lambda Managed Instances run several at once).
      const handle = streamHandle(held as unknown as Hono) as unknown as DataApiHandler;
      await handle(event, responseStream, context);
    } finally {
      // The body's own cancellation (an export stops its query) finishes before the invocation ends:
      // Lambda freezes the environment once the handler returns.
      await cancelled;
      responseStream.off("close", left);
      responseStream.off("error", left);
      deps.telemetry?.end();
    }
  };
}
