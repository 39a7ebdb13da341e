import { ResponseType, type RestApi } from "aws-cdk-lib/aws-apigateway";
import { Construct } from "constructs";
import { SECURITY_HEADERS } from "../lambda/app/security-headers";
import { ApiError, errors } from "../lambda/core/errors";

/** API Gateway's request body limit (10 MB), which it enforces before any function runs. */
export const GATEWAY_BODY_LIMIT = 10 * 1024 * 1024;

export interface GatewayError {
  type: ResponseType;
  /** Omitted: API Gateway keeps the status it chose (the DEFAULT_* families). */
  status?: number;
  /** A JSON body; `$context` variables are substituted by API Gateway (no VTL logic). */
  body: string;
  headers: Record<string, string>;
}

function fixed(type: ResponseType, error: ApiError, keepStatus = false): GatewayError {
  return {
    type,
    ...(!keepStatus && { status: error.status }),
    body: JSON.stringify(error.toBody()),
    headers: error.headers,
  };
}

/**
 * Every error API Gateway answers by itself, in the service's shape (DESIGN §7). The authorizer's 401s
 * come through ACCESS_DENIED (a Deny policy) because only that response can read the authorizer's
 * context: its body is the exact error the local middleware would give, including `missing_api_key`.
 */
export const GATEWAY_ERRORS: GatewayError[] = [
  {
    type: ResponseType.ACCESS_DENIED,
    status: 401,
    body: '{"error":{"message":"$context.authorizer.errorMessage","type":"$context.authorizer.errorType","code":"$context.authorizer.errorCode"}}',
    headers: {},
  },
  // The authorizer never throws "Unauthorized" and has no identity sources, so this is a fallback.
  fixed(ResponseType.UNAUTHORIZED, errors.invalidApiKey("Invalid API key provided.")),
  // REST APIs answer unknown routes with this "403 Missing Authentication Token": it is a 404.
  fixed(ResponseType.MISSING_AUTHENTICATION_TOKEN, errors.notFound()),
  fixed(ResponseType.RESOURCE_NOT_FOUND, errors.notFound()),
  fixed(ResponseType.THROTTLED, errors.rateLimited(1)),
  fixed(ResponseType.REQUEST_TOO_LARGE, errors.payloadTooLarge(GATEWAY_BODY_LIMIT)),
  fixed(ResponseType.AUTHORIZER_FAILURE, errors.internal()),
  fixed(ResponseType.AUTHORIZER_CONFIGURATION_ERROR, errors.internal()),
  fixed(
    ResponseType.INTEGRATION_FAILURE,
    new ApiError(
      502,
      "upstream_error",
      "upstream_unreachable",
      "The service behind the gateway could not be reached.",
    ),
  ),
  fixed(
    ResponseType.INTEGRATION_TIMEOUT,
    new ApiError(
      504,
      "upstream_error",
      "upstream_timeout",
      "The service behind the gateway did not answer in time.",
    ),
  ),
  {
    type: ResponseType.DEFAULT_4XX,
    body: '{"error":{"message":$context.error.messageString,"type":"invalid_request_error","code":"invalid_request"}}',
    headers: {},
  },
  fixed(ResponseType.DEFAULT_5XX, errors.internal(), true),
];

/** Gateway responses for every GATEWAY_ERRORS entry, each with the four security headers. */
export class GatewayResponses extends Construct {
  constructor(scope: Construct, id: string, api: RestApi) {
    super(scope, id);
    for (const error of GATEWAY_ERRORS) {
      const headers = { "Content-Type": "application/json", ...SECURITY_HEADERS, ...error.headers };
      api.addGatewayResponse(error.type.responseType, {
        type: error.type,
        ...(error.status !== undefined && { statusCode: String(error.status) }),
        // Static header values are single-quoted; API Gateway strips only the outer quotes.
        responseHeaders: Object.fromEntries(
          Object.entries(headers).map(([name, value]) => [name, `'${value}'`]),
        ),
        templates: { "application/json": error.body },
      });
    }
  }
}
