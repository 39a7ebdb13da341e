import type { APIGatewayProxyEvent, LambdaFunctionURLEvent, StreamifyHandler } from "aws-lambda";
import { streamHandle } from "hono/aws-lambda";
import { CachedSecret, createSecretsClient } from "../../adapters/secrets-manager/secrets";
import { createUpstreamClient } from "../../adapters/undici/client";
import { SECURITY_HEADERS } from "../../app/security-headers";
import type { ProxyComposition } from "../../compose/proxy";
import { ApiError, errors } from "../../core/errors";
import { errorFields, type Logger } from "../../core/logger";
import { VENDOR_DEFINITIONS } from "../../vendors";
import { forwardedAuth } from "./authorizer-context";
import type { ProxyConfig, ServedVendor } from "./config";
import { directCallRefused, ORIGIN_SECRET_HEADER, originVerified } from "./origin";
import type { LambdaTelemetry } from "./telemetry";

/** A function URL's event, or API Gateway's own (REST, payload 1.0) when it invokes the function. */
export type ProxyEvent = LambdaFunctionURLEvent | APIGatewayProxyEvent;
export type ProxyHandler = StreamifyHandler<ProxyEvent, void>;

const fromApiGateway = (event: ProxyEvent): event is APIGatewayProxyEvent => "httpMethod" in event;

export interface ProxyHandlerDeps {
  config: ProxyConfig;
  logger: Logger;
  /**
   * The composed proxy (lambda/compose/proxy.ts): its app for the managed key of the moment, and the
   * after-work each invocation waits for before it ends.
   */
  proxy: Pick<ProxyComposition, "app" | "pending">;
  /** Tags each invocation's logs and publishes its metrics once its work is done. */
  telemetry?: Pick<LambdaTelemetry, "begin" | "end">;
}

/**
 * The proxy of each vendor the function serves (`DMT_VENDORS`), streaming: the same Hono app as
 * locally, through `streamHandle`, chosen by the path's first segment (`/openai/...`). Behind its
 * function URL, API Gateway calls over HTTP_PROXY with the origin secret and the authorizer's decision
 * in headers, and anything else calling the URL is refused before any work; with
 * `dmt:proxyIntegration=lambda-stream` API Gateway invokes it with the decision in the event.
 */
export function createProxyHandler({ config, logger, proxy, telemetry }: ProxyHandlerDeps): ProxyHandler {
  const secrets = createSecretsClient(config.DMT_SECRETS_ENDPOINT);
  // The previous value too: during a rotation API Gateway sends it until redeployed (docs/aws.md).
  const originSecret =
    config.DMT_ORIGIN_SECRET_ARN === undefined
      ? undefined
      : new CachedSecret(
          secrets,
          config.DMT_ORIGIN_SECRET_ARN,
          ["AWSCURRENT", "AWSPREVIOUS"],
          config.DMT_SECRET_CACHE_MS,
          logger,
        );
  const served = new Map<string, { proxy(): Promise<ProxyHandler> }>(
    config.served.map((vendor) => [vendor.name, vendorProxy(vendor, config, secrets, proxy, logger)]),
  );
  const { pending } = proxy;

  /**
   * The proxy for this request, or why it is refused. Behind a function URL (an origin secret
   * configured) only URL events with the secret pass; without one (`lambda-stream`) only API Gateway's
   * own invocations, which only the API may make. A request refused gets nothing else.
   */
  const admit = async (event: ProxyEvent): Promise<ProxyHandler | ApiError> => {
    try {
      const admitted = originSecret
        ? !fromApiGateway(event) &&
          originVerified(event.headers[ORIGIN_SECRET_HEADER], await originSecret.values())
        : fromApiGateway(event);
      if (!admitted) return directCallRefused();
      const vendor = served.get(firstSegment(fromApiGateway(event) ? event.path : event.rawPath));
      return vendor ? await vendor.proxy() : errors.notFound();
    } catch (err) {
      logger.error("reading the proxy's secrets failed", errorFields(err));
      return errors.internal();
    }
  };

  return async (event, stream, context) => {
    telemetry?.begin(context);
    try {
      // Once the client has its whole response, the call's settlement and record must still finish
      // before the invocation ends (Lambda freezes the container once it returns); this call's only, as
      // other invocations may run in the same environment (Lambda Managed Instances).
      await pending.run(async () => {
        const proxy = await admit(event);
        if (proxy instanceof ApiError) return refuse(stream, proxy);
        await proxy(event, stream, context);
      });
    } finally {
      telemetry?.end();
    }
  };
}

/**
 * One vendor's proxy: its upstream, and its app for the managed key of the moment. The key is created
 * empty: until the operator puts a value, only dual keys can call this vendor; the operator may put or
 * replace it while containers run.
 */
function vendorProxy(
  served: ServedVendor,
  config: ProxyConfig,
  secrets: ReturnType<typeof createSecretsClient>,
  proxy: Pick<ProxyComposition, "app">,
  logger: Logger,
): { proxy(): Promise<ProxyHandler> } {
  const vendor = VENDOR_DEFINITIONS[served.name];
  const upstream = createUpstreamClient({
    target: served.upstreamUrl ?? vendor.defaultUpstream,
    connectTimeoutMs: config.DMT_UPSTREAM_CONNECT_TIMEOUT_MS,
    idleTimeoutMs: config.DMT_UPSTREAM_IDLE_TIMEOUT_MS,
  });
  const managedKey = new CachedSecret(
    secrets,
    served.keySecretArn,
    ["AWSCURRENT"],
    config.DMT_SECRET_CACHE_MS,
    logger,
  );
  let current: { key: string | undefined; handle: ProxyHandler } | undefined;
  return {
    async proxy() {
      const [key] = await managedKey.values();
      if (!current || current.key !== key) {
        const app = proxy.app({
          vendor,
          upstream,
          managedKey: key,
          upstreamState: key === undefined ? "missing_key" : "configured",
          auth: forwardedAuth,
        });
        // hono declares the buffered handler's type; streamHandle returns a streaming one.
        current = { key, handle: streamHandle(app) as unknown as ProxyHandler };
      }
      return current.handle;
    },
  };
}

/** `/openai/v1/chat/completions` → `openai`. */
function firstSegment(path: string): string {
  return path.split("/")[1] ?? "";
}

function refuse(stream: awslambda.HttpResponseStream, err: ApiError): void {
  awslambda.HttpResponseStream.from(stream, {
    statusCode: err.status,
    headers: { "content-type": "application/json", ...SECURITY_HEADERS, ...err.headers },
  }).end(JSON.stringify(err.toBody()));
}
