import { CfnOutput, Duration, RemovalPolicy, Stack, Validations } from "aws-cdk-lib";
import {
  AccessLogFormat,
  AuthorizationType,
  type CfnAuthorizer,
  ContentHandling,
  EndpointType,
  HttpIntegration,
  LambdaIntegration,
  LogGroupLogDestination,
  MethodLoggingLevel,
  MockIntegration,
  PassthroughBehavior,
  RequestAuthorizer,
  ResponseTransferMode,
  RestApi,
  SecurityPolicy,
} from "aws-cdk-lib/aws-apigateway";
import { Certificate } from "aws-cdk-lib/aws-certificatemanager";
import type { IFunction } from "aws-cdk-lib/aws-lambda";
import { LogGroup, type RetentionDays } from "aws-cdk-lib/aws-logs";
import { Construct } from "constructs";
import { SECURITY_HEADERS } from "../lambda/app/security-headers";
import { CONTEXT_FIELDS, contextHeader } from "../lambda/handlers/runtime/authorizer-context";
import { ORIGIN_SECRET_HEADER } from "../lambda/handlers/runtime/origin";
import { GatewayResponses } from "./gateway-responses";
import { PROXY_TIMEOUT } from "./proxy";

export const STAGE_NAME = "prod";

/** Where Stripe posts its events: the data API's route outside `/api/*` (lambda/app/data-api/stripe-webhook.ts). */
export const STRIPE_WEBHOOK_ROUTE = "stripe/webhook";

/** The data API's streaming integration timeout, and its function's: the longest an export may stream. */
export const DATA_API_TIMEOUT = Duration.minutes(15);

export interface CustomDomain {
  name: string;
  /** An ACM certificate for `name` in the stack's region (REGIONAL endpoint). */
  certificateArn: string;
}

export interface ApiProps {
  authorizer: IFunction;
  dataApi: IFunction;
  logRetention: RetentionDays;
  /** Stage-wide steady rate (requests per second) and burst; per-key limits are the service's own. */
  throttle: { rateLimit: number; burstLimit: number };
  domain?: CustomDomain;
  /**
   * Create API Gateway's account-level CloudWatch role (`AWS::ApiGateway::Account`, one per account
   * and region, kept when the stack goes). Off by default: an account that already has one, or a second
   * stack, would fight over it. An account without one needs it once, or its stage cannot log.
   */
  accountRole?: boolean;
}

/**
 * Access log fields. Never the query string (`?api_key=` may carry a key) and never headers: only the
 * path, the outcome, and who the authorizer said the caller is.
 */
const ACCESS_LOG_FIELDS = {
  requestId: "$context.requestId",
  time: "$context.requestTime",
  ip: "$context.identity.sourceIp",
  method: "$context.httpMethod",
  path: "$context.path",
  resource: "$context.resourcePath",
  status: "$context.status",
  responseType: "$context.error.responseType",
  error: "$context.error.message",
  responseLength: "$context.responseLength",
  latency: "$context.responseLatency",
  integrationLatency: "$context.integrationLatency",
  authorizerLatency: "$context.authorizer.integrationLatency",
  keyId: "$context.authorizer.principalId",
  projectId: "$context.authorizer.projectId",
  authError: "$context.authorizer.errorCode",
  userAgent: "$context.identity.userAgent",
};

/**
 * The public face: a REGIONAL REST API whose every method goes through the Lambda REQUEST authorizer.
 * `/api/v1/{proxy+}` is the data API; `addVendorProxy` adds each vendor's routes.
 */
export class Api extends Construct {
  readonly restApi: RestApi;
  readonly authorizer: RequestAuthorizer;
  readonly accessLogs: LogGroup;
  readonly executionLogs: LogGroup;

  constructor(scope: Construct, id: string, props: ApiProps) {
    super(scope, id);
    this.accessLogs = new LogGroup(this, "AccessLogs", {
      retention: props.logRetention,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    this.restApi = new RestApi(this, "RestApi", {
      // Named after the stack: API Gateway's metrics are by API name, and CDK's default is the same
      // `RestApi` in every stack of the account.
      restApiName: Stack.of(this).stackName,
      description: "dmt: metering gateway for language-model vendors",
      endpointConfiguration: { types: [EndpointType.REGIONAL] },
      // Bodies pass byte for byte (multipart audio uploads, audio and image responses).
      binaryMediaTypes: ["*/*"],
      // Access and execution logs need the account-level CloudWatch role of API Gateway (opt-in).
      cloudWatchRole: props.accountRole === true,
      deployOptions: {
        stageName: STAGE_NAME,
        accessLogDestination: new LogGroupLogDestination(this.accessLogs),
        accessLogFormat: AccessLogFormat.custom(JSON.stringify(ACCESS_LOG_FIELDS)),
        metricsEnabled: true,
        // ERROR, not INFO: INFO execution logs carry per-request detail, the authorizer's output among it.
        loggingLevel: MethodLoggingLevel.ERROR,
        dataTraceEnabled: false,
        throttlingRateLimit: props.throttle.rateLimit,
        throttlingBurstLimit: props.throttle.burstLimit,
      },
    });

    // The stack publishes the URL as `ApiUrl`; drop the duplicate output RestApi adds.
    this.restApi.node.tryRemoveChild("Endpoint");

    // The group API Gateway writes execution logs to, made here with a retention before the stage
    // exists (API Gateway would make it on its first log line, kept forever).
    this.executionLogs = new LogGroup(this, "ExecutionLogs", {
      logGroupName: `API-Gateway-Execution-Logs_${this.restApi.restApiId}/${STAGE_NAME}`,
      retention: props.logRetention,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    this.restApi.deploymentStage.node.addDependency(this.executionLogs);

    this.authorizer = this.createAuthorizer(props.authorizer);
    new GatewayResponses(this, "GatewayResponses", this.restApi);

    // Streamed as the proxies are (`InvokeWithResponseStream`, 15 minutes): an export leaves as Athena
    // pages it, past Lambda's 6 MB buffered response and the 29 s buffered timeout (docs/aws.md).
    const v1 = this.restApi.root.addResource("api").addResource("v1");
    const dataIntegration = new LambdaIntegration(props.dataApi, {
      proxy: true,
      responseTransferMode: ResponseTransferMode.STREAM,
      timeout: DATA_API_TIMEOUT,
      allowTestInvoke: false,
    });
    v1.addResource("{proxy+}").addMethod("ANY", dataIntegration, { authorizer: this.authorizer });
    // The data API's OpenAPI description is public, as API descriptions are: it holds no project's data,
    // and clients are generated from it before anyone has a key. The function answers it before auth.
    const description = v1
      .addResource("openapi.json")
      .addMethod("GET", dataIntegration, { authorizationType: AuthorizationType.NONE });
    Validations.of(description).acknowledge({
      id: "AwsSolutions-APIG4",
      reason: "The data API's public OpenAPI description: the same for everyone, no project's data.",
    });
    Validations.of(description).acknowledge({
      id: "AwsSolutions-COG4",
      reason: "The data API's public OpenAPI description: the same for everyone, no project's data.",
    });

    if (props.domain) this.addDomain(props.domain);
    this.acknowledgeFindings(props.accountRole === true);
  }

  /**
   * Keys arrive in five places (Authorization, X-API-Key, x-goog-api-key, ?api_key, ?key). A REQUEST
   * authorizer answers 401 without running when any identity source is missing, and API Gateway's
   * cache needs at least one, so: no identity sources and no gateway cache. Every request runs the
   * authorizer, whose in-container key cache makes that cheap; the revocation delay is that cache's
   * TTL. The policy it returns is a wildcard over the stage, so a decision never depends on the path.
   */
  private createAuthorizer(handler: IFunction): RequestAuthorizer {
    const authorizer = new RequestAuthorizer(this, "Authorizer", {
      handler,
      identitySources: [],
      resultsCacheTtl: Duration.seconds(0),
    });
    (authorizer.node.defaultChild as CfnAuthorizer).addPropertyDeletionOverride("IdentitySource");
    return authorizer;
  }

  /**
   * `/{vendor}` and `/{vendor}/{proxy+}` to a proxy function's URL: HTTP_PROXY (method, headers, query
   * and body pass as sent), the response streamed for up to 15 minutes, and in request headers the
   * origin secret and each field of the authorizer's context (`authorizer-context.ts` reads them).
   * `originSecret` is the header value as CloudFormation resolves it at deploy time. Given the function
   * itself instead, the routes invoke it (`addStreamingLambdaProxy`).
   */
  addVendorProxy(vendor: string, target: { functionUrl: string; originSecret: string } | IFunction): void {
    if (!("functionUrl" in target)) {
      this.addStreamingLambdaProxy(vendor, target);
      return;
    }
    const { functionUrl, originSecret } = target;
    const headers: Record<string, string> = {
      [`integration.request.header.${ORIGIN_SECRET_HEADER}`]: `'${originSecret}'`,
    };
    for (const field of CONTEXT_FIELDS) {
      headers[`integration.request.header.${contextHeader(field)}`] = `context.authorizer.${field}`;
    }
    // The function URL ends with a slash.
    const integration = (path: string, parameters: Record<string, string> = {}) =>
      new HttpIntegration(`${functionUrl}${path}`, {
        httpMethod: "ANY",
        options: {
          requestParameters: { ...headers, ...parameters },
          responseTransferMode: ResponseTransferMode.STREAM,
          timeout: PROXY_TIMEOUT,
        },
      });
    const prefix = this.restApi.root.addResource(vendor);
    prefix.addMethod("ANY", integration(vendor), { authorizer: this.authorizer });
    prefix
      .addResource("{proxy+}")
      .addMethod(
        "ANY",
        integration(`${vendor}/{proxy}`, { "integration.request.path.proxy": "method.request.path.proxy" }),
        { authorizer: this.authorizer, requestParameters: { "method.request.path.proxy": true } },
      );
  }

  /**
   * `/{vendor}` and `/{vendor}/{proxy+}` through API Gateway's Lambda proxy integration with response
   * streaming (`InvokeWithResponseStream`, 15 minutes): the function has no URL and needs no origin
   * secret, and the authorizer's context arrives in the event (`forwardedAuth` reads it there).
   */
  private addStreamingLambdaProxy(vendor: string, fn: IFunction): void {
    const integration = new LambdaIntegration(fn, {
      proxy: true,
      responseTransferMode: ResponseTransferMode.STREAM,
      timeout: PROXY_TIMEOUT,
      allowTestInvoke: false,
    });
    const prefix = this.restApi.root.addResource(vendor);
    prefix.addMethod("ANY", integration, { authorizer: this.authorizer });
    prefix.addResource("{proxy+}").addMethod("ANY", integration, { authorizer: this.authorizer });
  }

  /**
   * `POST /stripe/webhook`, Stripe's events (docs/billing.md): no key, the function checks the
   * `Stripe-Signature` header against the raw body and the webhook secret; 404 until the operator fills
   * the secrets. A function of its own (lib/payments.ts), buffered: Stripe's events are small.
   */
  addStripeWebhook(fn: IFunction): void {
    const [first, second] = STRIPE_WEBHOOK_ROUTE.split("/") as [string, string];
    const webhook = this.restApi.root
      .addResource(first)
      .addResource(second)
      .addMethod("POST", new LambdaIntegration(fn, { proxy: true, allowTestInvoke: false }), {
        authorizationType: AuthorizationType.NONE,
      });
    for (const id of ["AwsSolutions-APIG4", "AwsSolutions-COG4"]) {
      Validations.of(webhook).acknowledge({
        id,
        reason:
          "Stripe's webhook carries no dmt key: its function verifies Stripe's signature of the raw body (HMAC-SHA256, 5-minute tolerance) and grants nothing otherwise.",
      });
    }
  }

  /**
   * What the local server's root app answers (lambda/app/root.ts), answered by API Gateway itself
   * (MOCK integrations, no function): `GET /` redirects to the dashboard, `GET /healthz` says the API
   * is up. No key: neither reveals anything. Both carry the service's security headers.
   */
  addRootRoutes(dashboardUrl: string): void {
    const headers = (extra: Record<string, string>) => {
      const all = { ...SECURITY_HEADERS, "Cache-Control": "no-store", ...extra };
      return {
        integration: Object.fromEntries(
          Object.entries(all).map(([name, value]) => [`method.response.header.${name}`, `'${value}'`]),
        ),
        method: Object.fromEntries(Object.keys(all).map((name) => [`method.response.header.${name}`, true])),
      };
    };
    const mock = (status: number, extra: Record<string, string>, body?: string) => {
      const h = headers(extra);
      return {
        integration: new MockIntegration({
          // The API takes every media type as binary (`binaryMediaTypes: */*`), and API Gateway applies no
          // request template to a binary request: without this conversion both routes answer 500.
          contentHandling: ContentHandling.CONVERT_TO_TEXT,
          passthroughBehavior: PassthroughBehavior.NEVER,
          requestTemplates: { "application/json": `{"statusCode": ${status}}` },
          integrationResponses: [
            {
              statusCode: String(status),
              responseParameters: h.integration,
              ...(body !== undefined && { responseTemplates: { "application/json": body } }),
            },
          ],
        }),
        options: {
          authorizationType: AuthorizationType.NONE,
          methodResponses: [{ statusCode: String(status), responseParameters: h.method }],
        },
      };
    };
    const root = mock(302, { Location: dashboardUrl });
    const health = mock(200, { "Content-Type": "application/json" }, '{"status":"ok"}');
    for (const method of [
      this.restApi.root.addMethod("GET", root.integration, root.options),
      this.restApi.root.addResource("healthz").addMethod("GET", health.integration, health.options),
    ]) {
      Validations.of(method).acknowledge({
        id: "AwsSolutions-APIG4",
        reason:
          "A fixed answer of API Gateway itself (a redirect to the dashboard, a health check): no function runs and nothing is revealed, so no key is asked for.",
      });
    }
  }

  private addDomain(domain: CustomDomain): void {
    const customDomain = this.restApi.addDomainName("Domain", {
      domainName: domain.name,
      certificate: Certificate.fromCertificateArn(this, "Certificate", domain.certificateArn),
      endpointType: EndpointType.REGIONAL,
      securityPolicy: SecurityPolicy.TLS_1_2,
    });
    new CfnOutput(this, "DomainTarget", {
      description: `Point a CNAME (or an alias record) for ${domain.name} at this name`,
      value: customDomain.domainNameAliasDomainName,
    });
  }

  private acknowledgeFindings(accountRole: boolean): void {
    const api = Validations.of(this.restApi);
    api.acknowledge({
      id: "AwsSolutions-APIG2",
      reason:
        "Bodies are validated by the functions (the same Hono apps as locally); proxied vendor bodies must pass byte for byte, which request models would break.",
    });
    api.acknowledge({
      id: "AwsSolutions-COG4",
      reason:
        "Callers are applications holding dmt service keys, not Cognito users; the Lambda REQUEST authorizer authenticates every method.",
    });
    if (!accountRole) return;
    Validations.of(this.restApi.node.findChild("CloudWatchRole")).acknowledge({
      id: "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AmazonAPIGatewayPushToCloudWatchLogs]",
      reason:
        "The account-level role API Gateway needs to write access and execution logs; AWS maintains its policy for exactly this use.",
    });
  }
}
