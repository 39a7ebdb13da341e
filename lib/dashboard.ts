import { execFileSync } from "node:child_process";
import { join } from "node:path";
import {
  Aws,
  CfnOutput,
  type CfnResource,
  DefaultStackSynthesizer,
  DockerImage,
  Duration,
  Fn,
  Names,
  RemovalPolicy,
  Stack,
  Token,
  Validations,
} from "aws-cdk-lib";
import { AccessLogFormat } from "aws-cdk-lib/aws-apigateway";
import { HttpApi, HttpMethod, HttpStage, LogGroupLogDestination } from "aws-cdk-lib/aws-apigatewayv2";
import { HttpJwtAuthorizer } from "aws-cdk-lib/aws-apigatewayv2-authorizers";
import { HttpLambdaIntegration } from "aws-cdk-lib/aws-apigatewayv2-integrations";
import {
  AllowedMethods,
  CachePolicy,
  Distribution,
  Function as EdgeFunction,
  FunctionCode,
  FunctionEventType,
  FunctionRuntime,
  HeadersFrameOption,
  HttpVersion,
  OriginProtocolPolicy,
  OriginRequestPolicy,
  OriginSslPolicy,
  PriceClass,
  ResponseHeadersPolicy,
  S3OriginAccessControl,
  ViewerProtocolPolicy,
} from "aws-cdk-lib/aws-cloudfront";
import { HttpOrigin, S3BucketOrigin } from "aws-cdk-lib/aws-cloudfront-origins";
import {
  AccountRecovery,
  FeaturePlan,
  Mfa,
  OAuthScope,
  StandardThreatProtectionMode,
  UserPool,
  type UserPoolClient,
  type UserPoolDomain,
  UserPoolEmail,
} from "aws-cdk-lib/aws-cognito";
import { PolicyStatement, Role, ServicePrincipal } from "aws-cdk-lib/aws-iam";
import type { IKey } from "aws-cdk-lib/aws-kms";
import { LogGroup, type RetentionDays } from "aws-cdk-lib/aws-logs";
import { BlockPublicAccess, Bucket, BucketEncryption, type IBucket } from "aws-cdk-lib/aws-s3";
import { BucketDeployment, CacheControl, type ISource, Source } from "aws-cdk-lib/aws-s3-deployment";
import { Construct } from "constructs";
import { TABLES, type TableName } from "../lambda/adapters/dynamodb/tables";
import { DASHBOARD_API_PREFIX } from "../lambda/app/dashboard/app";
import { SECURITY_HEADERS } from "../lambda/app/security-headers";
import { errors } from "../lambda/core/errors";
import { WEBHOOK_SECRET_CONTEXT } from "../lambda/events/webhooks";
import type { DashboardConfig } from "../web/src/config";
import { DmtFunction, type LambdaDefaults, REPO_ROOT } from "./lambda-defaults";
import type { Store } from "./store";
import type { Warehouse } from "./warehouse";

/** `cdk deploy -c dmt:dashboardDomainPrefix=acme-dmt`: the Cognito sign-in domain's prefix. */
export const DASHBOARD_DOMAIN_PREFIX_CONTEXT = "dmt:dashboardDomainPrefix";
/** The group the dashboard API reads operators from (`cognito:groups`, lambda/app/dashboard/auth.ts). */
export const OPERATORS_GROUP = "operators";
/** The scope an access token needs for the dashboard API: ID tokens carry no scope, so they never pass. */
export const DASHBOARD_API_SCOPE = "dmt-dashboard/api";
/** Where the SPA lives on the distribution; the sign-in callback and the signed-out page are below it. */
const DASHBOARD_PATH = "/dashboard/";

export interface DashboardProps {
  defaults: LambdaDefaults;
  store: Store;
  warehouse: Warehouse;
  /** Wraps the BYOK vendor keys the dashboard stores (it makes data keys; only the proxies unwrap). */
  byokKey: IKey;
  /** Where the SPA bucket writes its access logs (the stack's logs bucket). */
  logsBucket: IBucket;
  /** For the user pool (its users and groups): RETAIN keeps it when the stack is deleted. */
  removalPolicy: RemovalPolicy;
  logRetention: RetentionDays;
  /**
   * Cognito's mail (invitations, codes) through SES from this verified identity. Without it Cognito's
   * own sender mails, whose small daily quota is for trials only.
   */
  ses?: SesSender;
  /** Concurrency set aside for the dashboard API (lib/stack.ts: `concurrency`). */
  reservedConcurrency?: number;
}

/** An identity verified in SES in the stack's region: an address, or a domain and an address in it. */
export interface SesSender {
  fromEmail: string;
  verifiedDomain?: string;
}

/**
 * The dashboard in AWS: the SPA from `web/` on a private S3 bucket behind CloudFront (origin access
 * control), the dashboard API (its own Lambda) behind an HTTP API whose JWT authorizer accepts only
 * this user pool's access tokens for this client, on the same origin at `/dashboard/api/*`, and the
 * Cognito user pool that signs people in (authorization code with PKCE, from the SPA).
 */
export class Dashboard extends Construct {
  readonly userPool: UserPool;
  readonly client: UserPoolClient;
  readonly domain: UserPoolDomain;
  readonly bucket: Bucket;
  readonly distribution: Distribution;
  readonly responseHeaders: ResponseHeadersPolicy;
  readonly routing: EdgeFunction;
  readonly httpApi: HttpApi;
  readonly authorizer: HttpJwtAuthorizer;
  readonly api: DmtFunction;
  readonly accessLogs: LogGroup;
  /** `https://<distribution>/dashboard/`. */
  readonly url: string;

  constructor(scope: Construct, id: string, props: DashboardProps) {
    super(scope, id);
    const stack = Stack.of(this);

    // --- Sign-in
    this.userPool = new UserPool(this, "UserPool", {
      userPoolName: `${stack.stackName}-dashboard`,
      // Operators create accounts (README, "Deploy to AWS").
      selfSignUpEnabled: false,
      signInAliases: { email: true },
      autoVerify: { email: true },
      accountRecovery: AccountRecovery.EMAIL_ONLY,
      passwordPolicy: {
        minLength: 12,
        requireLowercase: true,
        requireUppercase: true,
        requireDigits: true,
        requireSymbols: true,
        tempPasswordValidity: Duration.days(3),
      },
      // The dashboard creates API keys and grants credits: a second factor, by authenticator app.
      mfa: Mfa.REQUIRED,
      mfaSecondFactor: { otp: true, sms: false },
      // Plus: threat protection (compromised credentials, risky sign-ins) blocks, not just reports.
      featurePlan: FeaturePlan.PLUS,
      standardThreatProtectionMode: StandardThreatProtectionMode.FULL_FUNCTION,
      removalPolicy: props.removalPolicy,
      deletionProtection: props.removalPolicy === RemovalPolicy.RETAIN,
      ...(props.ses && {
        email: UserPoolEmail.withSES({
          fromEmail: props.ses.fromEmail,
          fromName: "dmt",
          sesRegion: stack.region,
          ...(props.ses.verifiedDomain !== undefined && { sesVerifiedDomain: props.ses.verifiedDomain }),
        }),
      }),
    });
    this.userPool.addGroup("Operators", {
      groupName: OPERATORS_GROUP,
      description: "dmt operators: grant credits and change project tiers in the dashboard",
    });
    const resourceServer = this.userPool.addResourceServer("DashboardApi", {
      identifier: DASHBOARD_API_SCOPE.split("/")[0] as string,
      scopes: [
        { scopeName: DASHBOARD_API_SCOPE.split("/")[1] as string, scopeDescription: "The dashboard API" },
      ],
    });

    // Unique per region across AWS: by default the stack's name and the account id.
    const domainPrefix =
      (this.node.tryGetContext(DASHBOARD_DOMAIN_PREFIX_CONTEXT) as string | undefined) ??
      `${stack.stackName.toLowerCase()}-${Aws.ACCOUNT_ID}`;
    this.domain = this.userPool.addDomain("Domain", { cognitoDomain: { domainPrefix } });
    const signInOrigin = this.domain.baseUrl();
    const issuerOrigin = `https://cognito-idp.${stack.region}.${stack.urlSuffix}`;

    // --- The SPA's bucket (build output only: it goes with the stack, whatever retainData says)
    this.bucket = new Bucket(this, "SiteBucket", {
      encryption: BucketEncryption.S3_MANAGED,
      blockPublicAccess: BlockPublicAccess.BLOCK_ALL,
      enforceSSL: true,
      minimumTLSVersion: 1.2,
      serverAccessLogsBucket: props.logsBucket,
      serverAccessLogsPrefix: "dashboard/",
      removalPolicy: RemovalPolicy.DESTROY,
    });

    // --- The dashboard API
    this.api = new DmtFunction(this, "Api", {
      handler: "dashboard",
      description: "dmt: dashboard API (/dashboard/api)",
      defaults: props.defaults,
      // The HTTP API waits 30 s at most.
      timeout: Duration.seconds(29),
      ...(props.reservedConcurrency !== undefined && { reservedConcurrency: props.reservedConcurrency }),
    });
    this.grantStore(props.store);
    this.api.function.addEnvironment("DMT_BYOK_KEY_ARN", props.byokKey.keyArn);
    props.byokKey.grant(this.api.function, "kms:GenerateDataKey");
    // A webhook test or resend signs with the webhook's secret, unwrapped here: webhook secrets only
    // (their encryption context), never a customer's vendor key.
    this.api.function.addToRolePolicy(
      new PolicyStatement({
        actions: ["kms:Decrypt"],
        resources: [props.byokKey.keyArn],
        conditions: { StringLike: { "kms:EncryptionContext:dmt:context": `${WEBHOOK_SECRET_CONTEXT}*` } },
      }),
    );
    // Export downloads query the warehouse through Athena, as the data API's exports do, and are
    // written to the results bucket and handed out presigned (lambda/app/dashboard/downloads.ts).
    props.warehouse.connectDownloads(this.api.function);

    this.accessLogs = new LogGroup(this, "AccessLogs", {
      retention: props.logRetention,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    this.httpApi = new HttpApi(this, "HttpApi", {
      description: "dmt: dashboard API, reached through the dashboard's CloudFront distribution",
      createDefaultStage: false,
    });
    new HttpStage(this, "Stage", {
      httpApi: this.httpApi,
      stageName: "$default",
      autoDeploy: true,
      throttle: { rateLimit: 50, burstLimit: 100 },
      accessLogSettings: {
        destination: new LogGroupLogDestination(this.accessLogs),
        format: AccessLogFormat.custom(JSON.stringify(ACCESS_LOG_FIELDS)),
      },
    });

    // --- CloudFront: the SPA from S3, the API on the same origin
    this.responseHeaders = new ResponseHeadersPolicy(this, "SecurityHeaders", {
      responseHeadersPolicyName: this.regionalName("headers", 128),
      comment: "dmt dashboard: the service's four security headers",
      securityHeadersBehavior: {
        contentSecurityPolicy: {
          contentSecurityPolicy: dashboardContentSecurityPolicy([issuerOrigin, signInOrigin]),
          override: true,
        },
        strictTransportSecurity: {
          accessControlMaxAge: Duration.seconds(31_536_000),
          includeSubdomains: false,
          override: true,
        },
        contentTypeOptions: { override: true },
        frameOptions: { frameOption: HeadersFrameOption.DENY, override: true },
      },
    });
    this.routing = new EdgeFunction(this, "SpaRouting", {
      comment: "dmt dashboard: page paths to index.html, / to /dashboard/",
      code: FunctionCode.fromInline(SPA_ROUTING_CODE),
      runtime: FunctionRuntime.JS_2_0,
    });
    // The execute-api host of the HTTP API's $default stage: paths pass unchanged.
    const apiDomain = Fn.select(2, Fn.split("/", this.httpApi.apiEndpoint));
    this.distribution = new Distribution(this, "Distribution", {
      comment: `${stack.stackName} dashboard`,
      httpVersion: HttpVersion.HTTP2_AND_3,
      priceClass: PriceClass.PRICE_CLASS_100,
      defaultBehavior: {
        origin: S3BucketOrigin.withOriginAccessControl(this.bucket, {
          originAccessControl: new S3OriginAccessControl(this, "SiteAccess", {
            originAccessControlName: this.regionalName("site", 64),
            description: "dmt dashboard: CloudFront reads the SPA's bucket",
          }),
        }),
        viewerProtocolPolicy: ViewerProtocolPolicy.REDIRECT_TO_HTTPS,
        allowedMethods: AllowedMethods.ALLOW_GET_HEAD,
        cachePolicy: CachePolicy.CACHING_OPTIMIZED,
        responseHeadersPolicy: this.responseHeaders,
        functionAssociations: [{ function: this.routing, eventType: FunctionEventType.VIEWER_REQUEST }],
      },
      additionalBehaviors: {
        [`${DASHBOARD_API_PREFIX}/*`]: {
          origin: new HttpOrigin(apiDomain, {
            protocolPolicy: OriginProtocolPolicy.HTTPS_ONLY,
            originSslProtocols: [OriginSslPolicy.TLS_V1_2],
          }),
          viewerProtocolPolicy: ViewerProtocolPolicy.HTTPS_ONLY,
          allowedMethods: AllowedMethods.ALLOW_ALL,
          // Never cached; with caching off, this policy passes Authorization on (never the Host).
          cachePolicy: CachePolicy.CACHING_DISABLED,
          originRequestPolicy: OriginRequestPolicy.ALL_VIEWER_EXCEPT_HOST_HEADER,
          responseHeadersPolicy: this.responseHeaders,
        },
      },
    });
    const origin = `https://${this.distribution.distributionDomainName}`;
    this.url = `${origin}${DASHBOARD_PATH}`;

    this.client = this.userPool.addClient("SpaClient", {
      // A browser app holds no secret: authorization code with PKCE (the SPA always sends S256).
      generateSecret: false,
      authFlows: { userSrp: true },
      oAuth: {
        flows: { authorizationCodeGrant: true },
        scopes: [
          OAuthScope.OPENID,
          OAuthScope.EMAIL,
          OAuthScope.PROFILE,
          OAuthScope.resourceServer(resourceServer, {
            scopeName: DASHBOARD_API_SCOPE.split("/")[1] as string,
            scopeDescription: "The dashboard API",
          }),
        ],
        callbackUrls: [`${origin}${DASHBOARD_PATH}callback`],
        logoutUrls: [`${origin}${DASHBOARD_PATH}signed-out`],
      },
      preventUserExistenceErrors: true,
      enableTokenRevocation: true,
      // The SPA signs in again when its session ends (no refresh); the shortest Cognito allows.
      accessTokenValidity: Duration.hours(1),
      idTokenValidity: Duration.hours(1),
      refreshTokenValidity: Duration.hours(1),
    });

    // Cognito access tokens carry `client_id`, not `aud`: the authorizer compares it with the audience.
    this.authorizer = new HttpJwtAuthorizer("CognitoAccessToken", this.userPool.userPoolProviderUrl, {
      jwtAudience: [this.client.userPoolClientId],
      identitySource: ["$request.header.Authorization"],
    });
    this.httpApi.addRoutes({
      path: `${DASHBOARD_API_PREFIX}/{proxy+}`,
      methods: [HttpMethod.ANY],
      integration: new HttpLambdaIntegration("DashboardApi", this.api.function),
      authorizer: this.authorizer,
      authorizationScopes: [DASHBOARD_API_SCOPE],
    });
    // The function checks the token again (signature, issuer, client, expiry) and reads the groups.
    this.api.function.addEnvironment("DMT_DASHBOARD_ISSUER", this.userPool.userPoolProviderUrl);
    this.api.function.addEnvironment("DMT_DASHBOARD_CLIENT_ID", this.client.userPoolClientId);
    // The Members page invites a user of the pool by email: it looks the user up, nothing more.
    this.api.function.addEnvironment("DMT_DASHBOARD_USER_POOL_ID", this.userPool.userPoolId);
    this.userPool.grant(this.api.function, "cognito-idp:ListUsers");

    const config: DashboardConfig = {
      issuer: this.userPool.userPoolProviderUrl,
      clientId: this.client.userPoolClientId,
      scope: `openid email profile ${DASHBOARD_API_SCOPE}`,
      apiBase: DASHBOARD_API_PREFIX,
      // Cognito publishes no end_session_endpoint; its sign-out is the domain's /logout, which sends
      // the browser back to a logout URL registered on the client (`logoutUrls` above).
      logoutEndpoint: `${signInOrigin}/logout`,
    };
    this.deploySite(props.logRetention, config);
    this.acknowledgeFindings();
    new CfnOutput(stack, "DashboardUrl", { value: this.url, description: "The dashboard (sign in here)" });
    new CfnOutput(stack, "DashboardUserPoolId", {
      value: this.userPool.userPoolId,
      description: "Dashboard users: aws cognito-idp admin-create-user --user-pool-id <this> ...",
    });
    new CfnOutput(stack, "DashboardSignInDomain", { value: signInOrigin });
  }

  /**
   * A name for a CloudFront resource: CloudFront names are unique in the account, across regions, so
   * the same stack in a second region needs a name of its own (the region at the end, at most 15 chars).
   */
  private regionalName(what: string, maxLength: number): string {
    const prefix = Names.uniqueResourceName(this, {
      maxLength: maxLength - what.length - 17,
      separator: "-",
    });
    return `${prefix}-${what}-${Stack.of(this).region}`;
  }

  /**
   * Exactly what the dashboard's routes do in the store (lambda/app/dashboard/*.ts through the DynamoDB
   * adapters): keys, memberships, credits, vendor keys, settings, deletion requests; the interactions
   * index and rollups read only.
   */
  private grantStore(store: Store): void {
    const fn = this.api.function;
    const access: Partial<Record<TableName, string[]>> = {
      projects: ["GetItem", "PutItem", "UpdateItem"],
      keys: ["GetItem", "PutItem", "UpdateItem"],
      members: ["GetItem", "PutItem", "Query"],
      dashboardRequests: ["GetItem", "PutItem", "UpdateItem", "DeleteItem"],
      credits: ["GetItem", "PutItem", "UpdateItem"],
      ledger: ["GetItem", "PutItem", "Query"],
      vendorKeys: ["UpdateItem", "Query", "DeleteItem"],
      interactions: ["GetItem", "Query"],
      usageRollups: ["Query"],
      projectSettings: ["UpdateItem"],
      // Requests are written (the table's stream starts the workflow: no Step Functions access here),
      // read back, and their per-file progress summed.
      deletionRequests: ["PutItem", "GetItem", "Query"],
      // The Budgets page: definitions set, listed and deleted; the current windows' spend read.
      budgets: ["PutItem", "Query", "DeleteItem"],
      budgetCounters: ["GetItem"],
      // Settings -> Alerts and Webhooks: rules set, listed, deleted (and a low-balance one checked at
      // once); webhooks added, listed, deleted; the delivery log read and written by tests and resends.
      alertRules: ["PutItem", "Query", "DeleteItem", "UpdateItem"],
      webhooks: ["PutItem", "GetItem", "Query", "DeleteItem"],
      webhookDeliveries: ["PutItem", "GetItem", "Query"],
      // The Credits page shows the project's plan: read only (the CLI changes plans).
      plans: ["GetItem"],
    };
    for (const [table, actions] of Object.entries(access) as [TableName, string[]][]) {
      store.grant(fn, table, actions);
    }
    // Listing a project's keys, members and deletion requests queries the tables' indexes.
    // A balance's and a window's charges in flight: the open holds' index of credits and budget counters.
    const indexed: TableName[] = ["keys", "members", "deletionRequests", "credits", "budgetCounters"];
    fn.addToRolePolicy(
      new PolicyStatement({
        actions: ["dynamodb:Query"],
        resources: indexed.flatMap((table) =>
          (TABLES[table].indexes ?? []).map((index) => `${store.tables[table].tableArn}/index/${index.name}`),
        ),
      }),
    );
  }

  /**
   * The SPA (`dashboardSiteSource`) and the `config.json` it reads, uploaded under `dashboard/`. Every
   * file is served `no-cache` (revalidated, as the local server does): the file names carry no content
   * hash, so a deploy shows at the next load.
   */
  private deploySite(logRetention: RetentionDays, config: DashboardConfig): void {
    const role = new Role(this, "SiteDeploymentRole", {
      assumedBy: new ServicePrincipal("lambda.amazonaws.com"),
    });
    const logGroup = new LogGroup(this, "SiteDeploymentLogs", {
      retention: logRetention,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    logGroup.grantWrite(role);
    new BucketDeployment(this, "Site", {
      sources: [dashboardSiteSource(), Source.jsonData("config.json", config)],
      destinationBucket: this.bucket,
      destinationKeyPrefix: DASHBOARD_PATH.slice(1),
      cacheControl: [CacheControl.noCache()],
      // Deleting the stack empties the bucket, so that it can go too.
      retainOnDelete: false,
      role,
      logGroup,
    });
    this.acknowledgeSiteDeployment(role);
  }

  /** BucketDeployment's own handler (aws-cdk-lib's), which runs only while CloudFormation deploys. */
  private acknowledgeSiteDeployment(role: Role): void {
    const stack = Stack.of(this);
    const bucketId = stack.getLogicalId(this.bucket.node.defaultChild as CfnResource);
    const copy =
      "BucketDeployment copies the built SPA from the CDK asset bucket into the site bucket and prunes what the build no longer has";
    Validations.of(role).acknowledge(
      ...["s3:GetBucket*", "s3:GetObject*", "s3:List*", "s3:Abort*", "s3:DeleteObject*"].map((action) => ({
        id: `AwsSolutions-IAM5[Action::${action}]`,
        reason: `${copy}: aws-cdk-lib grants these action groups, on the two buckets only.`,
      })),
      {
        id: `AwsSolutions-IAM5[Resource::${assetObjectsAsNagShowsThem(stack)}]`,
        reason: `${copy}: it reads the asset object, whose name CDK chooses per build, from the bootstrap bucket.`,
      },
      {
        id: `AwsSolutions-IAM5[Resource::<${bucketId}.Arn>/*]`,
        reason: `${copy}: it writes and deletes any object of the site bucket, which holds nothing else.`,
      },
    );
    const handler = stack.node.children.find((child) =>
      child.node.id.startsWith("Custom::CDKBucketDeployment"),
    );
    if (!handler) throw new Error("BucketDeployment's handler function was not found");
    Validations.of(handler).acknowledge({
      id: "AwsSolutions-L1",
      reason:
        "BucketDeployment's handler runtime is chosen by aws-cdk-lib (Python, with the AWS CLI layer); it runs only during deployments, never on a request.",
    });
  }

  /** cdk-nag findings this design accepts, each next to its resource and with its reason. */
  private acknowledgeFindings(): void {
    Validations.of(this.distribution).acknowledge(
      {
        id: "AwsSolutions-CFR1",
        reason:
          "The dashboard serves customers wherever they are; access is by Cognito sign-in, not by country.",
      },
      {
        id: "AwsSolutions-CFR2",
        reason:
          "No WAF by default: the SPA is static files and every API call needs a Cognito access token checked by the JWT authorizer and the function; attach a web ACL to the distribution if wanted.",
      },
      {
        id: "AwsSolutions-CFR3",
        reason:
          "API calls are logged by the HTTP API's access log; CloudFront standard logs need an ACL-enabled bucket, and every bucket of this stack keeps ACLs disabled (bucket-owner enforced).",
      },
      {
        id: "AwsSolutions-CFR4",
        reason:
          "The distribution uses its *.cloudfront.net name and CloudFront's default certificate, whose TLS policy AWS sets; a custom domain with an ACM certificate would allow TLSv1.2_2021.",
      },
    );
  }
}

/**
 * The CDK asset bucket's objects as cdk-nag names them in a finding: what CDK knows at synthesis
 * (`cdk deploy` gives the region) is literal, the rest `<AWS::...>`.
 */
function assetObjectsAsNagShowsThem(stack: Stack): string {
  const shown = (value: string, pseudo: string) => (Token.isUnresolved(value) ? `<AWS::${pseudo}>` : value);
  const qualifier =
    (stack.node.tryGetContext("@aws-cdk/core:bootstrapQualifier") as string | undefined) ??
    DefaultStackSynthesizer.DEFAULT_QUALIFIER;
  const account = shown(stack.account, "AccountId");
  return `arn:${shown(stack.partition, "Partition")}:s3:::cdk-${qualifier}-assets-${account}-${shown(stack.region, "Region")}/*`;
}

/** `web/` built by `web/build.ts` at synth time, with the local esbuild (never Docker). */
export function dashboardSiteSource(): ISource {
  return Source.asset(join(REPO_ROOT, "web"), {
    bundling: {
      image: DockerImage.fromRegistry("unused-the-dashboard-builds-locally"),
      local: {
        tryBundle(outputDir) {
          execFileSync(process.execPath, ["--import", "tsx", join("web", "build.ts"), outputDir], {
            cwd: REPO_ROOT,
            stdio: ["ignore", "ignore", "inherit"],
          });
          return true;
        },
      },
    },
  });
}

/** The HTTP API's access log: who called what and how it ended; never the token or the query string. */
const ACCESS_LOG_FIELDS = {
  requestId: "$context.requestId",
  ip: "$context.identity.sourceIp",
  requestTime: "$context.requestTime",
  method: "$context.httpMethod",
  path: "$context.path",
  status: "$context.status",
  responseLength: "$context.responseLength",
  integrationLatency: "$context.integrationLatency",
  user: "$context.authorizer.claims.sub",
  authError: "$context.authorizer.error",
};

/**
 * The local CSP (`default-src 'self'`) plus the identity provider the SPA fetches from: Cognito's
 * discovery document (on the issuer's host) and its token endpoint (on the sign-in domain). Sign-in
 * and sign-out are navigations, which `connect-src` does not govern.
 */
function dashboardContentSecurityPolicy(identityProviderOrigins: string[]): string {
  const base = SECURITY_HEADERS["Content-Security-Policy"];
  return `${base}; connect-src 'self' ${identityProviderOrigins.join(" ")}; frame-ancestors 'none'`;
}

/**
 * A CloudFront Function (viewer request, JS 2.0) on the SPA's behaviour: `/` and `/dashboard` go to
 * `/dashboard/`; a page path below it (no dot in its last segment, e.g. `/dashboard/callback`) is served
 * `index.html` (the SPA routes with the History API); files pass; anything else is the service's 404.
 */
export const SPA_ROUTING_CODE = `function handler(event) {
  var request = event.request;
  var uri = request.uri;
  if (uri === "/" || uri === "/dashboard") {
    return { statusCode: 302, statusDescription: "Found", headers: { location: { value: "${DASHBOARD_PATH}" } } };
  }
  if (uri.indexOf("${DASHBOARD_PATH}") !== 0) {
    return {
      statusCode: 404,
      statusDescription: "Not Found",
      headers: { "content-type": { value: "application/json" } },
      body: { encoding: "text", data: ${JSON.stringify(JSON.stringify(errors.notFound().toBody()))} },
    };
  }
  if (uri.slice(uri.lastIndexOf("/") + 1).indexOf(".") === -1) request.uri = "${DASHBOARD_PATH}index.html";
  return request;
}
`;
