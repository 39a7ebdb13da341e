/**
 * The dashboard in the CDK stack: the Cognito user pool, app client and domain; the SPA's bucket and
 * its CloudFront distribution (origin access control, behaviours, security headers, SPA routing); the
 * HTTP API with its JWT authorizer and the dashboard function's grants; the site deployment; cdk-nag.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { App, type CfnResource, Stack, Validations } from "aws-cdk-lib";
import { Template } from "aws-cdk-lib/assertions";
import { Bucket } from "aws-cdk-lib/aws-s3";
import { BucketDeployment } from "aws-cdk-lib/aws-s3-deployment";
import type { CloudAssembly } from "aws-cdk-lib/cx-api";
import { AwsSolutionsChecks, type IApplyRule, NagRuleCompliance } from "cdk-nag";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TABLES, type TableName } from "../../lambda/adapters/dynamodb/tables";
import { SECURITY_HEADERS } from "../../lambda/app/security-headers";
import { errors } from "../../lambda/core/errors";
import { defineApp } from "../../lib/app";
import {
  DASHBOARD_API_SCOPE,
  DASHBOARD_DOMAIN_PREFIX_CONTEXT,
  dashboardSiteSource,
  OPERATORS_GROUP,
  SPA_ROUTING_CODE,
} from "../../lib/dashboard";
import { REPO_ROOT } from "../../lib/lambda-defaults";
import { DmtStack } from "../../lib/stack";

type Resource = { Type: string; Properties: Record<string, unknown>; DeletionPolicy?: string };
type Statement = {
  Action: string | string[];
  Resource: unknown;
  Effect: string;
  Principal?: unknown;
  Condition?: unknown;
};

const CDK_JSON_CONTEXT = JSON.parse(readFileSync(join(REPO_ROOT, "cdk.json"), "utf8")).context as Record<
  string,
  unknown
>;
const NO_BUNDLING = { "aws:cdk:bundling-stacks": [] };
const outdirs: string[] = [];

function newApp(context: Record<string, unknown> = {}): App {
  const outdir = mkdtempSync(join(tmpdir(), "dmt-dashboard-cdk-"));
  outdirs.push(outdir);
  return new App({ outdir, context: { ...CDK_JSON_CONTEXT, ...NO_BUNDLING, ...context } });
}

let stack: DmtStack;
let assembly: CloudAssembly;
let template: Template;
let resources: Record<string, Resource>;

beforeAll(() => {
  // The Lambda bundles are checked by stack.test.ts; the SPA's build below, on its own.
  const app = newApp();
  stack = defineApp(app);
  // Throws on any cdk-nag finding nobody acknowledged.
  assembly = app.synth();
  const json = assembly.getStackByName(stack.stackName).template;
  template = Template.fromJSON(json);
  resources = json.Resources;
});

afterAll(() => {
  for (const dir of outdirs) rmSync(dir, { recursive: true, force: true });
});

const dashboard = () => stack.dashboard;
const id = (construct: { node: { defaultChild?: unknown } }) =>
  stack.getLogicalId(construct.node.defaultChild as CfnResource);
const ref = (construct: { node: { defaultChild?: unknown } }) => ({ Ref: id(construct) });
const getAtt = (construct: { node: { defaultChild?: unknown } }, attribute: string) => ({
  "Fn::GetAtt": [id(construct), attribute],
});

function propertiesOf(logicalId: string): Record<string, unknown> {
  const resource = resources[logicalId];
  if (!resource) throw new Error(`no resource ${logicalId}`);
  return resource.Properties;
}

function ofType(type: string): [string, Resource][] {
  return Object.entries(resources).filter(([, r]) => r.Type === type);
}

/** CloudFormation's Fn::Join of literals, Refs and GetAtts, as text: `{LogicalId}`, `{LogicalId.Attr}`. */
function render(value: unknown): string {
  if (typeof value === "string") return value;
  const object = value as Record<string, unknown>;
  const join = object["Fn::Join"] as [string, unknown[]] | undefined;
  if (join) return join[1].map(render).join(join[0]);
  if (typeof object.Ref === "string") return `{${object.Ref}}`;
  const att = object["Fn::GetAtt"] as [string, string] | undefined;
  if (att) return `{${att[0]}.${att[1]}}`;
  return JSON.stringify(value);
}

/** Every statement of the policies attached to a role. */
function statementsOf(role: { node: { defaultChild?: unknown } }): Statement[] {
  return ofType("AWS::IAM::Policy")
    .filter(([, p]) => JSON.stringify(p.Properties.Roles) === JSON.stringify([ref(role)]))
    .flatMap(([, p]) => (p.Properties.PolicyDocument as { Statement: Statement[] }).Statement);
}

const actionsOf = (s: Statement) => (Array.isArray(s.Action) ? s.Action : [s.Action]);
const resourcesOf = (s: Statement) => (Array.isArray(s.Resource) ? s.Resource : [s.Resource]);

describe("user pool", () => {
  it("signs in only people an operator created, with a strong password and an authenticator app", () => {
    const pool = propertiesOf(id(dashboard().userPool));
    expect(pool).toMatchObject({
      AdminCreateUserConfig: { AllowAdminCreateUserOnly: true },
      UsernameAttributes: ["email"],
      AutoVerifiedAttributes: ["email"],
      MfaConfiguration: "ON",
      EnabledMfas: ["SOFTWARE_TOKEN_MFA"],
      AccountRecoverySetting: { RecoveryMechanisms: [{ Name: "verified_email", Priority: 1 }] },
      Policies: {
        PasswordPolicy: {
          MinimumLength: 12,
          RequireLowercase: true,
          RequireUppercase: true,
          RequireNumbers: true,
          RequireSymbols: true,
          TemporaryPasswordValidityDays: 3,
        },
      },
      // Threat protection enforced: compromised credentials and risky sign-ins are blocked.
      UserPoolTier: "PLUS",
      UserPoolAddOns: { AdvancedSecurityMode: "ENFORCED" },
      DeletionProtection: "ACTIVE",
    });
    expect(resources[id(dashboard().userPool)]?.DeletionPolicy).toBe("Retain");
  });

  it("has the operators group the dashboard API reads from cognito:groups", () => {
    template.hasResourceProperties("AWS::Cognito::UserPoolGroup", {
      GroupName: OPERATORS_GROUP,
      UserPoolId: ref(dashboard().userPool),
    });
    // The literal the token verifier compares with (lambda/app/dashboard/auth.ts).
    expect(readFileSync(join(REPO_ROOT, "lambda/app/dashboard/auth.ts"), "utf8")).toContain(
      `groups.includes("${OPERATORS_GROUP}")`,
    );
  });

  it("has a resource server whose scope the dashboard API requires", () => {
    const [identifier, scope] = DASHBOARD_API_SCOPE.split("/");
    template.hasResourceProperties("AWS::Cognito::UserPoolResourceServer", {
      Identifier: identifier,
      Scopes: [{ ScopeName: scope, ScopeDescription: "The dashboard API" }],
    });
  });

  it("has a sign-in domain named after the stack and the account, or from context", () => {
    expect(propertiesOf(id(dashboard().domain))).toEqual({
      Domain: { "Fn::Join": ["", ["dmt-", { Ref: "AWS::AccountId" }]] },
      UserPoolId: ref(dashboard().userPool),
    });
    const variant = defineApp(newApp({ [DASHBOARD_DOMAIN_PREFIX_CONTEXT]: "acme-dmt" }));
    Template.fromStack(variant).hasResourceProperties("AWS::Cognito::UserPoolDomain", {
      Domain: "acme-dmt",
    });
  });
});

describe("app client", () => {
  it("uses the authorization code flow without a secret, back to the distribution's /dashboard/", () => {
    const client = propertiesOf(id(dashboard().client));
    const origin = `https://{${id(dashboard().distribution)}.DomainName}`;
    expect(client).toMatchObject({
      GenerateSecret: false,
      AllowedOAuthFlowsUserPoolClient: true,
      AllowedOAuthFlows: ["code"],
      SupportedIdentityProviders: ["COGNITO"],
      ExplicitAuthFlows: ["ALLOW_USER_SRP_AUTH", "ALLOW_REFRESH_TOKEN_AUTH"],
      PreventUserExistenceErrors: "ENABLED",
      EnableTokenRevocation: true,
      AccessTokenValidity: 60,
      IdTokenValidity: 60,
    });
    expect((client.CallbackURLs as unknown[]).map(render)).toEqual([`${origin}/dashboard/callback`]);
    expect((client.LogoutURLs as unknown[]).map(render)).toEqual([`${origin}/dashboard/signed-out`]);
    const resourceServer = ofType("AWS::Cognito::UserPoolResourceServer")[0]?.[0];
    expect((client.AllowedOAuthScopes as unknown[]).map(render)).toEqual([
      "openid",
      "email",
      "profile",
      `{${resourceServer}}/${DASHBOARD_API_SCOPE.split("/")[1]}`,
    ]);
  });
});

describe("CloudFront", () => {
  const config = () =>
    propertiesOf(id(dashboard().distribution)).DistributionConfig as {
      DefaultCacheBehavior: Record<string, unknown>;
      CacheBehaviors: Record<string, unknown>[];
      Origins: {
        Id: string;
        DomainName: unknown;
        OriginAccessControlId?: unknown;
        CustomOriginConfig?: unknown;
      }[];
      ViewerCertificate?: unknown;
      Logging?: unknown;
    };
  const origin = (originId: unknown) => config().Origins.find((o) => o.Id === originId);

  it("serves the SPA from the private bucket through origin access control", () => {
    const oacs = ofType("AWS::CloudFront::OriginAccessControl");
    expect(oacs).toHaveLength(1);
    expect(oacs[0]?.[1].Properties.OriginAccessControlConfig).toMatchObject({
      OriginAccessControlOriginType: "s3",
      SigningBehavior: "always",
      SigningProtocol: "sigv4",
    });
    const s3 = origin(config().DefaultCacheBehavior.TargetOriginId);
    expect(s3?.DomainName).toEqual(getAtt(dashboard().bucket, "RegionalDomainName"));
    expect(s3?.OriginAccessControlId).toEqual({ "Fn::GetAtt": [oacs[0]?.[0], "Id"] });
    expect(config().DefaultCacheBehavior).toMatchObject({
      ViewerProtocolPolicy: "redirect-to-https",
      AllowedMethods: ["GET", "HEAD"],
      // CachingOptimized: the files are sent `no-cache`, so they are revalidated.
      CachePolicyId: "658327ea-f89d-4fab-a63d-7e88639e58f6",
      ResponseHeadersPolicyId: ref(dashboard().responseHeaders),
      FunctionAssociations: [
        { EventType: "viewer-request", FunctionARN: getAtt(dashboard().routing, "FunctionARN") },
      ],
    });
  });

  it("sends /dashboard/api/* to the HTTP API, uncached, with the caller's Authorization", () => {
    expect(config().CacheBehaviors).toHaveLength(1);
    const api = config().CacheBehaviors[0] as Record<string, unknown>;
    expect(api).toMatchObject({
      PathPattern: "/dashboard/api/*",
      ViewerProtocolPolicy: "https-only",
      AllowedMethods: ["GET", "HEAD", "OPTIONS", "PUT", "PATCH", "POST", "DELETE"],
      CachePolicyId: "4135ea2d-6df8-44a3-9df3-4b5a84be39ad", // CachingDisabled
      OriginRequestPolicyId: "b689b0a8-53d0-40ab-baf2-68738e2966ac", // AllViewerExceptHostHeader
      ResponseHeadersPolicyId: ref(dashboard().responseHeaders),
    });
    expect(api.FunctionAssociations).toBeUndefined();
    expect(origin(api.TargetOriginId)).toMatchObject({
      DomainName: { "Fn::Select": [2, { "Fn::Split": ["/", getAtt(dashboard().httpApi, "ApiEndpoint")] }] },
      CustomOriginConfig: { OriginProtocolPolicy: "https-only", OriginSSLProtocols: ["TLSv1.2"] },
    });
  });

  it("adds the service's four security headers, with a CSP that lets the SPA reach Cognito", () => {
    const policy = propertiesOf(id(dashboard().responseHeaders)).ResponseHeadersPolicyConfig as {
      SecurityHeadersConfig: Record<string, Record<string, unknown>>;
    };
    const headers = policy.SecurityHeadersConfig;
    expect(headers.StrictTransportSecurity).toEqual({
      AccessControlMaxAgeSec: 31_536_000,
      IncludeSubdomains: false,
      Override: true,
    });
    expect(SECURITY_HEADERS["Strict-Transport-Security"]).toBe("max-age=31536000");
    expect(headers.ContentTypeOptions).toEqual({ Override: true });
    expect(headers.FrameOptions).toEqual({ FrameOption: "DENY", Override: true });
    expect(headers.ContentSecurityPolicy?.Override).toBe(true);
    expect(render(headers.ContentSecurityPolicy?.ContentSecurityPolicy)).toBe(
      `${SECURITY_HEADERS["Content-Security-Policy"]}; connect-src 'self' ` +
        "https://cognito-idp.{AWS::Region}.{AWS::URLSuffix} " +
        `https://{${id(dashboard().domain)}}.auth.{AWS::Region}.amazoncognito.com; frame-ancestors 'none'`,
    );
  });
});

describe("SPA routing function", () => {
  type Result = {
    uri?: string;
    statusCode?: number;
    headers?: Record<string, { value: string }>;
    body?: { data: string };
  };
  const handler = new Function(`${SPA_ROUTING_CODE}\nreturn handler;`)() as (event: unknown) => Result;
  const route = (uri: string) => handler({ request: { uri, method: "GET", querystring: {}, headers: {} } });

  it("is the code the distribution runs, on the JS 2.0 runtime", () => {
    template.hasResourceProperties("AWS::CloudFront::Function", {
      FunctionCode: SPA_ROUTING_CODE,
      FunctionConfig: {
        Runtime: "cloudfront-js-2.0",
        Comment: "dmt dashboard: page paths to index.html, / to /dashboard/",
      },
    });
  });

  it("serves index.html for the SPA's pages, and files as they are", () => {
    for (const page of ["/dashboard/", "/dashboard/callback", "/dashboard/signed-out", "/dashboard/keys"]) {
      expect(route(page).uri, page).toBe("/dashboard/index.html");
    }
    for (const file of ["/dashboard/config.json", "/dashboard/assets/app.js", "/dashboard/index.html"]) {
      expect(route(file).uri, file).toBe(file);
    }
  });

  it("redirects the root to /dashboard/ and answers anything else with the service's 404", () => {
    for (const uri of ["/", "/dashboard"]) {
      expect(route(uri)).toMatchObject({ statusCode: 302, headers: { location: { value: "/dashboard/" } } });
    }
    const other = route("/api/v1/status");
    expect(other.statusCode).toBe(404);
    expect(JSON.parse(other.body?.data ?? "")).toEqual(errors.notFound().toBody());
  });
});

describe("site bucket", () => {
  it("is private, encrypted, logged, and goes with the stack (it holds only the build)", () => {
    const bucket = resources[id(dashboard().bucket)];
    expect(bucket?.DeletionPolicy).toBe("Delete");
    expect(bucket?.Properties).toMatchObject({
      PublicAccessBlockConfiguration: {
        BlockPublicAcls: true,
        BlockPublicPolicy: true,
        IgnorePublicAcls: true,
        RestrictPublicBuckets: true,
      },
      BucketEncryption: {
        ServerSideEncryptionConfiguration: [{ ServerSideEncryptionByDefault: { SSEAlgorithm: "AES256" } }],
      },
      LoggingConfiguration: {
        DestinationBucketName: ref(stack.warehouse.logsBucket),
        LogFilePrefix: "dashboard/",
      },
    });
    expect(bucket?.Properties.WebsiteConfiguration).toBeUndefined();
  });

  it("lets only this distribution read it, over TLS 1.2 or later", () => {
    const [, policy] =
      ofType("AWS::S3::BucketPolicy").find(
        ([, p]) => JSON.stringify(p.Properties.Bucket) === JSON.stringify(ref(dashboard().bucket)),
      ) ?? [];
    const statements =
      (policy?.Properties.PolicyDocument as { Statement: Statement[] } | undefined)?.Statement ?? [];
    const allows = statements.filter((s) => s.Effect === "Allow");
    expect(allows).toEqual([
      {
        Action: "s3:GetObject",
        Effect: "Allow",
        Principal: { Service: "cloudfront.amazonaws.com" },
        Resource: { "Fn::Join": ["", [getAtt(dashboard().bucket, "Arn"), "/*"]] },
        Condition: {
          StringEquals: {
            "AWS:SourceArn": {
              "Fn::Join": [
                "",
                [
                  "arn:",
                  { Ref: "AWS::Partition" },
                  ":cloudfront::",
                  { Ref: "AWS::AccountId" },
                  ":distribution/",
                  ref(dashboard().distribution),
                ],
              ],
            },
          },
        },
      },
    ]);
    const denies = statements.filter((s) => s.Effect === "Deny");
    expect(denies.map((s) => s.Condition)).toEqual([
      { Bool: { "aws:SecureTransport": "false" } },
      { NumericLessThan: { "s3:TlsVersion": 1.2 } },
    ]);
  });
});

describe("HTTP API", () => {
  it("authorizes with the pool's access tokens for this client (issuer = pool, audience = client id)", () => {
    const authorizers = ofType("AWS::ApiGatewayV2::Authorizer");
    expect(authorizers).toHaveLength(1);
    expect(authorizers[0]?.[1].Properties).toEqual({
      ApiId: ref(dashboard().httpApi),
      AuthorizerType: "JWT",
      IdentitySource: ["$request.header.Authorization"],
      JwtConfiguration: {
        Audience: [ref(dashboard().client)],
        Issuer: getAtt(dashboard().userPool, "ProviderURL"),
      },
      Name: "CognitoAccessToken",
    });
  });

  it("has one route, /dashboard/api/{proxy+}, that needs the token and the dashboard scope", () => {
    const routes = ofType("AWS::ApiGatewayV2::Route");
    expect(routes).toHaveLength(1);
    expect(routes[0]?.[1].Properties).toMatchObject({
      RouteKey: "ANY /dashboard/api/{proxy+}",
      AuthorizationType: "JWT",
      AuthorizerId: { Ref: ofType("AWS::ApiGatewayV2::Authorizer")[0]?.[0] },
      AuthorizationScopes: [DASHBOARD_API_SCOPE],
    });
    template.hasResourceProperties("AWS::ApiGatewayV2::Integration", {
      IntegrationType: "AWS_PROXY",
      IntegrationUri: getAtt(dashboard().api.function, "Arn"),
      PayloadFormatVersion: "2.0",
    });
  });

  it("logs every call and throttles on its $default stage", () => {
    const stages = ofType("AWS::ApiGatewayV2::Stage");
    expect(stages).toHaveLength(1);
    const stage = stages[0]?.[1].Properties as Record<string, Record<string, unknown>>;
    expect(stage.StageName).toBe("$default");
    expect(stage.AutoDeploy).toBe(true);
    expect(stage.DefaultRouteSettings).toMatchObject({ ThrottlingRateLimit: 50, ThrottlingBurstLimit: 100 });
    expect(stage.AccessLogSettings?.DestinationArn).toEqual(getAtt(dashboard().accessLogs, "Arn"));
    const fields = JSON.parse(String(stage.AccessLogSettings?.Format));
    expect(Object.values(fields)).not.toContain("$context.identity.user");
    expect(JSON.stringify(fields)).not.toMatch(/querystring|header\.authorization/i);
  });

  it("lets only this API invoke the function", () => {
    const permissions = ofType("AWS::Lambda::Permission").filter(
      ([, p]) =>
        JSON.stringify(p.Properties.FunctionName) === JSON.stringify(getAtt(dashboard().api.function, "Arn")),
    );
    expect(permissions).toHaveLength(1);
    expect(permissions[0]?.[1].Properties.Principal).toBe("apigateway.amazonaws.com");
    expect(render(permissions[0]?.[1].Properties.SourceArn)).toBe(
      `arn:{AWS::Partition}:execute-api:{AWS::Region}:{AWS::AccountId}:{${id(dashboard().httpApi)}}/*/*/dashboard/api/{proxy+}`,
    );
  });
});

describe("dashboard function", () => {
  it("knows the issuer and client it checks tokens against, and the tables it may use", () => {
    const env = (
      propertiesOf(id(dashboard().api.function)).Environment as { Variables: Record<string, unknown> }
    ).Variables;
    expect(env.DMT_DASHBOARD_ISSUER).toEqual(getAtt(dashboard().userPool, "ProviderURL"));
    expect(env.DMT_DASHBOARD_CLIENT_ID).toEqual(ref(dashboard().client));
    expect(env.DMT_DASHBOARD_USER_POOL_ID).toEqual(ref(dashboard().userPool));
    const tables = Object.keys(env).filter((name) => name.startsWith("DMT_TABLE_"));
    expect(tables.length).toBeGreaterThan(10);
    for (const name of Object.keys(TABLES) as TableName[]) {
      const variable = `DMT_TABLE_${name.toUpperCase()}`;
      if (tables.includes(variable)) expect(env[variable]).toEqual(ref(stack.store.tables[name]));
    }
    // Metering's sweeper and the warehouse's own tables are none of the dashboard's business.
    expect(tables).not.toContain("DMT_TABLE_WAREHOUSEDELIVERIES");
    expect(tables).not.toContain("DMT_TABLE_IDEMPOTENCY");
    expect(env.DMT_ATHENA_WORKGROUP).toEqual({ Ref: stack.getLogicalId(stack.warehouse.workGroup) });
  });

  it("has exactly the DynamoDB access the dashboard's routes use", () => {
    const table = (name: TableName) => `{${id(stack.store.tables[name])}.Arn}`;
    const granted = new Map<string, Set<string>>();
    for (const statement of statementsOf(dashboard().api.function.role as never)) {
      const actions = actionsOf(statement).filter((a) => a.startsWith("dynamodb:"));
      if (actions.length === 0) continue;
      expect(statement.Condition).toBeUndefined();
      for (const resource of resourcesOf(statement).map(render)) {
        const set = granted.get(resource) ?? new Set<string>();
        for (const action of actions) set.add(action.slice("dynamodb:".length));
        granted.set(resource, set);
      }
    }
    const sorted = new Map([...granted].map(([resource, actions]) => [resource, [...actions].sort()]));
    expect(Object.fromEntries(sorted)).toEqual({
      [table("projects")]: ["GetItem", "PutItem", "UpdateItem"],
      [table("keys")]: ["GetItem", "PutItem", "UpdateItem"],
      [`${table("keys")}/index/byProject`]: ["Query"],
      [table("members")]: ["GetItem", "PutItem", "Query"],
      [`${table("members")}/index/byProject`]: ["Query"],
      [table("dashboardRequests")]: ["DeleteItem", "GetItem", "PutItem", "UpdateItem"],
      [table("credits")]: ["GetItem", "PutItem", "UpdateItem"],
      [table("ledger")]: ["GetItem", "PutItem", "Query"],
      // The Budgets page: definitions set and deleted, the current windows' spend read.
      [table("budgets")]: ["DeleteItem", "PutItem", "Query"],
      [table("budgetCounters")]: ["GetItem"],
      // The open holds of a window or a balance, through the sweeper's index (hold-items.ts).
      [`${table("budgetCounters")}/index/holdsDue`]: ["Query"],
      [`${table("credits")}/index/holdsDue`]: ["Query"],
      // Settings -> Alerts and Webhooks.
      [table("alertRules")]: ["DeleteItem", "PutItem", "Query", "UpdateItem"],
      [table("webhooks")]: ["DeleteItem", "GetItem", "PutItem", "Query"],
      [table("webhookDeliveries")]: ["GetItem", "PutItem", "Query"],
      // The Credits page shows the project's price plan, read only.
      [table("plans")]: ["GetItem"],
      [table("vendorKeys")]: ["DeleteItem", "Query", "UpdateItem"],
      // Interaction pages read packs from the table itself, never its old filter indexes.
      [table("interactions")]: ["GetItem", "Query"],
      [table("usageRollups")]: ["Query"],
      [table("projectSettings")]: ["GetItem", "UpdateItem"],
      [table("deletionRequests")]: ["GetItem", "PutItem", "Query"],
      [`${table("deletionRequests")}/index/byCreated`]: ["Query"],
      // Buy credits and the auto-recharge rule: the project's billing profile (lib/payments.ts).
      [table("payments")]: ["GetItem", "UpdateItem"],
    });
  });

  it("writes export downloads to the results bucket and presigns them; no export bucket, no other bucket", () => {
    const env = (
      propertiesOf(id(dashboard().api.function)).Environment as { Variables: Record<string, unknown> }
    ).Variables;
    expect(env.DMT_ATHENA_RESULTS_BUCKET).toEqual(ref(stack.warehouse.resultsBucket));
    const statements = statementsOf(dashboard().api.function.role as never);
    const onObjects = statements.filter((s) => actionsOf(s).some((a) => a.endsWith("Object")));
    const objects = Object.fromEntries(
      onObjects.map((s) => [resourcesOf(s).map(render).join(" "), [...actionsOf(s)].sort()]),
    );
    expect(objects).toEqual({
      // Athena's results and the downloads beside them: written, read back, presigned (S3 checks a
      // presigned GET against the signer's grants).
      [`{${id(stack.warehouse.resultsBucket)}.Arn}/*`]: [
        "s3:AbortMultipartUpload",
        "s3:GetObject",
        "s3:ListMultipartUploadParts",
        "s3:PutObject",
      ],
      // Athena reads the Parquet files with the caller's grants: the records, and the erased usage a
      // FOCUS download sums in (docs/deletion.md).
      [`{${id(stack.warehouse.dataBucket)}.Arn}/erased-usage/* {${id(stack.warehouse.dataBucket)}.Arn}/interactions/*`]:
        ["s3:GetObject"],
    });
    expect(JSON.stringify(statements)).not.toContain(id(stack.warehouse.exportBucket));
  });

  it("may look up the pool's users by email for invitations, and change none", () => {
    const statements = statementsOf(dashboard().api.function.role as never);
    const cognito = statements.filter((s) => actionsOf(s).some((a) => a.startsWith("cognito-idp:")));
    expect(cognito).toEqual([
      { Action: "cognito-idp:ListUsers", Effect: "Allow", Resource: getAtt(dashboard().userPool, "Arn") },
    ]);
  });

  it("may make data keys with the BYOK key, unwrap webhook secrets only, and reads only Stripe's two secrets", () => {
    const statements = statementsOf(dashboard().api.function.role as never);
    const kms = statements.filter((s) => actionsOf(s).some((a) => a.startsWith("kms:")));
    expect(kms).toEqual([
      { Action: "kms:GenerateDataKey", Effect: "Allow", Resource: getAtt(stack.secrets.byokKey, "Arn") },
      {
        Action: "kms:Decrypt",
        Effect: "Allow",
        Resource: getAtt(stack.secrets.byokKey, "Arn"),
        // Never a vendor key: their context is another.
        Condition: { StringLike: { "kms:EncryptionContext:dmt:context": "dmt webhook secret\n*" } },
      },
    ]);
    // Buy credits: the Stripe key and the webhook's secret (payments are on once both are filled).
    const secretReads = statements.filter((s) => actionsOf(s).some((a) => a.startsWith("secretsmanager:")));
    expect(
      secretReads.flatMap(actionsOf).every((a) => /^secretsmanager:(GetSecretValue|DescribeSecret)$/.test(a)),
    ).toBe(true);
    expect(secretReads.flatMap(resourcesOf).map(render).sort()).toEqual(
      [stack.payments.secretKey, stack.payments.webhookSecret].map((secret) => `{${id(secret)}}`).sort(),
    );
    const env = (
      propertiesOf(id(dashboard().api.function)).Environment as { Variables: Record<string, unknown> }
    ).Variables;
    expect(env.DMT_BYOK_KEY_ARN).toEqual(getAtt(stack.secrets.byokKey, "Arn"));
  });
});

describe("site deployment", () => {
  const deployment = () => {
    const found = ofType("Custom::CDKBucketDeployment");
    expect(found).toHaveLength(1);
    return found[0]?.[1].Properties as Record<string, unknown>;
  };

  it("uploads the build and config.json under dashboard/, served no-cache, emptied with the stack", () => {
    expect(deployment()).toMatchObject({
      DestinationBucketName: ref(dashboard().bucket),
      DestinationBucketKeyPrefix: "dashboard/",
      Prune: true,
      RetainOnDelete: false,
      SystemMetadata: { "cache-control": "no-cache" },
    });
  });

  it("writes config.json with the pool's issuer, the client id, the scope, the API base and Cognito's sign-out", () => {
    const markers = deployment().SourceMarkers as Record<string, unknown>[];
    const keys = deployment().SourceObjectKeys as string[];
    const index = markers.findIndex((m) => Object.keys(m).length > 0);
    const staged = join(assembly.directory, `asset.${keys[index]?.replace(/\.zip$/, "")}`, "config.json");
    const config = JSON.parse(readFileSync(staged, "utf8")) as Record<string, string>;
    const resolve = (value: string | undefined) => markers[index]?.[value ?? ""];
    expect(resolve(config.issuer)).toEqual(getAtt(dashboard().userPool, "ProviderURL"));
    expect(resolve(config.clientId)).toEqual(ref(dashboard().client));
    expect(config.scope).toBe(`openid email profile ${DASHBOARD_API_SCOPE}`);
    expect(config.apiBase).toBe("/dashboard/api");
    // Cognito's /logout on the sign-in domain; it returns to the client's registered logout URL.
    const logout = config.logoutEndpoint?.replace(/<<marker:[^>]+>>/g, (marker) => render(resolve(marker)));
    expect(logout).toBe(`https://{${id(dashboard().domain)}}.auth.{AWS::Region}.amazoncognito.com/logout`);
  });

  it("runs with a role that may write only its own log group, kept like the others'", () => {
    const fn = ofType("AWS::Lambda::Function").find(([logicalId]) =>
      logicalId.startsWith("CustomCDKBucketDeployment"),
    );
    const props = fn?.[1].Properties as { Role: unknown; LoggingConfig: { LogGroup: { Ref: string } } };
    const roleId = (props.Role as { "Fn::GetAtt": [string, string] })["Fn::GetAtt"][0];
    expect(propertiesOf(roleId).ManagedPolicyArns).toBeUndefined();
    expect(propertiesOf(props.LoggingConfig.LogGroup.Ref).RetentionInDays).toBe(30);
  });
});

describe("outputs", () => {
  it("publishes the dashboard's URL, its user pool and its sign-in domain", () => {
    template.hasOutput("DashboardUrl", {
      Value: {
        "Fn::Join": ["", ["https://", getAtt(dashboard().distribution, "DomainName"), "/dashboard/"]],
      },
    });
    template.hasOutput("DashboardUserPoolId", { Value: ref(dashboard().userPool) });
    template.hasOutput("DashboardSignInDomain", {});
  });
});

/** Every finding of the AwsSolutions pack, acknowledged or not. */
class AllFindings extends AwsSolutionsChecks {
  readonly found: { path: string; id: string }[] = [];

  protected override applyRule(params: IApplyRule): void {
    const ruleId = `${this.packName}-${params.ruleSuffixOverride ?? params.rule.name}`;
    const result = params.rule(params.node);
    if (result === NagRuleCompliance.NON_COMPLIANT)
      this.found.push({ path: params.node.node.path, id: ruleId });
    else if (Array.isArray(result))
      for (const finding of result)
        this.found.push({ path: params.node.node.path, id: `${ruleId}[${finding}]` });
  }
}

describe("cdk-nag AwsSolutions", () => {
  it("finds nothing unacknowledged in the dashboard, and each acknowledgement matches a finding and says why", () => {
    const acknowledged: { path: string; id: string; reason: string }[] = [];
    for (const construct of stack.node.findAll()) {
      for (const entry of construct.node.metadata) {
        if (entry.type !== Validations.ACKNOWLEDGED_RULES_METADATA_KEY) continue;
        for (const [ruleId, reason] of Object.entries(entry.data as Record<string, string>)) {
          acknowledged.push({ path: construct.node.path, id: ruleId.replace(/^annotation::/i, ""), reason });
        }
      }
    }
    const checks = new AllFindings();
    checks.validateScope(stack);
    const covers = (ack: { path: string; id: string }, finding: { path: string; id: string }) =>
      ack.id === finding.id && (finding.path === ack.path || finding.path.startsWith(`${ack.path}/`));
    const ours = (path: string) =>
      path.startsWith(`${stack.stackName}/Dashboard`) || path.includes("CDKBucketDeployment");
    const findings = checks.found.filter((f) => ours(f.path));
    expect(findings.filter((f) => !acknowledged.some((ack) => covers(ack, f)))).toEqual([]);
    const mine = acknowledged.filter((ack) => ours(ack.path));
    expect(mine.filter((ack) => !findings.some((f) => covers(ack, f)))).toEqual([]);
    for (const ack of mine) expect(ack.reason.length, ack.id).toBeGreaterThan(60);
    // What this design accepts, and nothing about Cognito, S3 or the HTTP API.
    expect(new Set(findings.map((f) => f.id.replace(/\[.*$/, "")))).toEqual(
      new Set([
        "AwsSolutions-CFR1",
        "AwsSolutions-CFR2",
        "AwsSolutions-CFR3",
        "AwsSolutions-CFR4",
        "AwsSolutions-IAM5",
        "AwsSolutions-L1",
      ]),
    );
  });
});

describe("cdk-nag in a known region and account", () => {
  it.each([
    ["a region only (cdk synth without credentials)", { region: "us-east-1" }],
    ["a region and an account (cdk deploy)", { account: "123456789012", region: "eu-west-1" }],
  ])("still finds every dashboard finding acknowledged with %s", (_, env) => {
    const app = newApp();
    new DmtStack(app, "Dmt", { env });
    Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
    expect(() => app.synth()).not.toThrow();
  });
});

describe("the SPA's build", () => {
  it("is made by web/build.ts at synth time, without Docker", () => {
    const app = newApp({ "aws:cdk:bundling-stacks": ["**"] });
    const site = new Stack(app, "Site");
    new BucketDeployment(site, "Deployment", {
      sources: [dashboardSiteSource()],
      destinationBucket: new Bucket(site, "Bucket"),
    });
    const out = app.synth();
    const staged = readdirSync(out.directory)
      .map((name) => join(out.directory, name))
      .find((dir) => existsSync(join(dir, "index.html")));
    expect(staged).toBeDefined();
    const dir = staged as string;
    expect(readdirSync(join(dir, "assets")).sort()).toEqual(
      ["app.css", "app.css.map", "app.js", "app.js.map", "favicon.svg"].sort(),
    );
    const html = readFileSync(join(dir, "index.html"), "utf8");
    expect(html).toContain('<script type="module" src="/dashboard/assets/app.js"></script>');
    // No inline script or style: the CSP's default-src 'self' holds.
    expect(html).not.toMatch(/<script(?![^>]*\ssrc=)[^>]*>|<style|\sstyle=/);
  }, 120_000);
});
