import type { APIGatewayAuthorizerResult, APIGatewayRequestAuthorizerEvent } from "aws-lambda";
import { authenticate } from "../../core/auth";
import { presentedCredentials } from "../../core/credentials";
import { endpointOf } from "../../core/endpoints";
import { ApiError } from "../../core/errors";
import type { CachedKeyLookup } from "../../core/key-cache";
import type { KeyUsageTracker } from "../../core/key-usage";
import { errorFields, type Logger } from "../../core/logger";
import { type AuthorizerContext, grantedContext, refusalContext } from "./authorizer-context";

export interface AuthorizerDeps {
  keys: CachedKeyLookup;
  usage: KeyUsageTracker;
  logger: Logger;
  clock: () => number;
}

/**
 * The API Gateway REQUEST authorizer: the same credential parsing, key lookup cache and
 * authentication as the local middleware. API Gateway caching is off (no identity sources; see
 * docs/aws.md), so the revocation delay is this container's key cache, `DMT_KEY_CACHE_MS`.
 */
export function createAuthorizer({ keys, usage, logger, clock }: AuthorizerDeps) {
  return async (event: APIGatewayRequestAuthorizerEvent): Promise<APIGatewayAuthorizerResult> => {
    const resource = wildcardResource(event.methodArn);
    const endpoint = endpointOf(event.path);
    // Every authorized route lives under a family prefix, so this is a wiring mistake, not a caller's.
    if (!endpoint) throw new Error(`No endpoint family for the authorized path ${event.resource}.`);
    try {
      const credentials = presentedCredentials({
        header: headerReader(event),
        query: (name) =>
          event.multiValueQueryStringParameters?.[name]?.[0] ?? event.queryStringParameters?.[name],
        geminiFamily: endpoint.startsWith("gemini:"),
      });
      const auth = await authenticate(credentials, endpoint, keys, clock());
      usage.touch(auth.keyId);
      // A frozen container would lose a write in flight; at most one per key per minute waits here.
      await usage.flush();
      return policy(auth.keyId, "Allow", resource, grantedContext(auth));
    } catch (err) {
      if (err instanceof ApiError && err.status === 401) {
        return policy("anonymous", "Deny", resource, refusalContext(err));
      }
      // 403: the key is genuine but restricted; the function renders the refusal before any work.
      if (err instanceof ApiError && err.status === 403) {
        return policy("restricted", "Allow", resource, refusalContext(err));
      }
      logger.error("authorizer failed", errorFields(err));
      throw err; // API Gateway answers 500 (AUTHORIZER_FAILURE)
    }
  };
}

/** Header lookup by lowercase name; repeated headers are joined by ", " as Node joins them locally. */
function headerReader(event: APIGatewayRequestAuthorizerEvent): (name: string) => string | undefined {
  const headers = new Map<string, string>();
  for (const [name, values] of Object.entries(event.multiValueHeaders ?? {})) {
    if (!values) continue;
    const key = name.toLowerCase();
    const seen = headers.get(key);
    headers.set(key, [...(seen === undefined ? [] : [seen]), ...values].join(", "));
  }
  for (const [name, value] of Object.entries(event.headers ?? {})) {
    if (value !== undefined && !headers.has(name.toLowerCase())) headers.set(name.toLowerCase(), value);
  }
  return (name) => headers.get(name);
}

/** `arn:...:<api id>/<stage>/*`: the decision does not depend on the method or path it was made for. */
function wildcardResource(methodArn: string): string {
  const [apiArn, stage] = methodArn.split("/");
  return `${apiArn}/${stage}/*`;
}

function policy(
  principalId: string,
  effect: "Allow" | "Deny",
  resource: string,
  context: AuthorizerContext,
): APIGatewayAuthorizerResult {
  return {
    principalId,
    policyDocument: {
      Version: "2012-10-17",
      Statement: [{ Action: "execute-api:Invoke", Effect: effect, Resource: resource }],
    },
    context,
  };
}
