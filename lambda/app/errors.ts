import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import { ApiError, errors } from "../core/errors";
import { errorFields, type Logger } from "../core/logger";

/** Renders any thrown value in the service's error shape; unknown failures become a bare 500. */
export function errorResponse(err: unknown, c: Context, logger: Logger): Response {
  const apiError = toApiError(err);
  if (apiError.status >= 500 && !(err instanceof ApiError)) {
    logger.error("unhandled error", { ...errorFields(err), method: c.req.method, path: c.req.path });
  }
  return apiErrorResponse(apiError);
}

export function apiErrorResponse(err: ApiError): Response {
  return new Response(JSON.stringify(err.toBody()), {
    status: err.status,
    headers: { "Content-Type": "application/json", ...err.headers },
  });
}

function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof HTTPException) {
    if (err.status < 500)
      return new ApiError(err.status, "invalid_request_error", "invalid_request", err.message);
  }
  return errors.internal();
}
