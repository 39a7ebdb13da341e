import { createHash, timingSafeEqual } from "node:crypto";
import { ApiError } from "../../core/errors";

/**
 * The header in which API Gateway's integrations send the origin secret to the proxy functions' URLs
 * (lib/api.ts). A function URL is public; a request without this secret did not come through the API,
 * its authorizer and its throttling, and is refused before anything else happens.
 */
export const ORIGIN_SECRET_HEADER = "x-dmt-origin-secret";

export const directCallRefused = (): ApiError =>
  new ApiError(
    403,
    "permission_error",
    "direct_call_refused",
    "This function answers only requests that come through the API.",
  );

const digest = (value: string): Buffer => createHash("sha256").update(value, "utf8").digest();

/**
 * Whether the presented secret equals one of the accepted values (the current one, and the previous one
 * during a rotation), in time independent of where they differ: digests first, so lengths do not
 * show either, and every accepted value is compared.
 */
export function originVerified(presented: string | undefined, accepted: readonly string[]): boolean {
  if (presented === undefined) return false;
  const presentedDigest = digest(presented);
  let verified = false;
  for (const value of accepted) verified = timingSafeEqual(presentedDigest, digest(value)) || verified;
  return verified;
}
