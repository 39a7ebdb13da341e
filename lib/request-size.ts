import { Stack } from "aws-cdk-lib";
import type { RestApi } from "aws-cdk-lib/aws-apigateway";
import { CfnWebACL, CfnWebACLAssociation } from "aws-cdk-lib/aws-wafv2";
import { Construct } from "constructs";
import { DATA_API_BODY_LIMIT } from "../lambda/app/body";
import { SECURITY_HEADERS } from "../lambda/app/security-headers";
import { errors } from "../lambda/core/errors";
import { STAGE_NAME } from "./api";

/**
 * The largest body a function behind the API takes: Lambda's 6 MB request payload counts the whole
 * event, and the API passes every body as binary, so base64 (4/3) and the event's headers and context
 * come on top. 4 MiB encodes to 5.33 MiB, leaving ~650 KiB for the rest.
 */
export const LAMBDA_BODY_LIMIT = 4 * 1024 * 1024;

/** The data API's routes that read a body, each with the local server's 1 MiB limit. */
export const DATA_API_BODY_PATHS = ["/api/v1/exports", "/api/v1/data"] as const;

/**
 * The web ACL's rules, first match wins: the data API's body routes at their own limit, so AWS names
 * the same limit as the local server; then every other route at what a function can take.
 */
export const BODY_LIMIT_RULES = [
  { name: "DataApiBodyOverLimit", paths: DATA_API_BODY_PATHS, limit: DATA_API_BODY_LIMIT },
  { name: "BodyOverLambdaLimit", paths: undefined, limit: LAMBDA_BODY_LIMIT },
] as const;

/**
 * A regular expression matching the decimal numbers above `limit` (leading zeros allowed): longer
 * numbers, or as long with a larger digit after a common prefix. AWS WAF matches header text, not
 * numbers, so this is how it compares a Content-Length.
 */
export function decimalAbove(limit: number): string {
  const digits = String(limit);
  const alternatives = [`[1-9][0-9]{${digits.length},}`];
  for (let i = 0; i < digits.length; i++) {
    const digit = Number(digits[i]);
    if (digit === 9) continue;
    const rest = digits.length - i - 1;
    const next = digit + 1 === 9 ? "9" : `[${digit + 1}-9]`;
    alternatives.push(`${digits.slice(0, i)}${next}${rest > 0 ? `[0-9]{${rest}}` : ""}`);
  }
  return `^0*(${alternatives.join("|")})$`;
}

/**
 * The request paths of `paths` as WAF sees them: on the execute-api address the stage comes first
 * (`/prod/api/v1/exports`), on a custom domain it does not.
 */
export function pathsRegex(stageName: string, paths: readonly string[]): string {
  const literal = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, (c) => `\\${c}`);
  return `^(/${literal(stageName)})?(${paths.map(literal).join("|")})$`;
}

/**
 * An AWS WAF web ACL on the API's stage whose rules answer a request declaring a body over its route's
 * limit (its Content-Length) with 413 in the service's error shape, the limit in the message, before
 * the authorizer or any function runs. Everything else is allowed. A chunked body declares no length
 * and passes: the function's own limit (Lambda's 413 past ~4.5 MB) stays the backstop (docs/aws.md).
 */
export class RequestSizeRule extends Construct {
  readonly webAcl: CfnWebACL;

  constructor(scope: Construct, id: string, restApi: RestApi) {
    super(scope, id);
    const metric = (name: string) => ({
      cloudWatchMetricsEnabled: true,
      metricName: `${Stack.of(this).stackName}-${name}`,
      sampledRequestsEnabled: false,
    });
    // Security headers only: WAF sets the content type from the body, and the connection is its own.
    const responseHeaders = Object.entries(SECURITY_HEADERS).map(([name, value]) => ({ name, value }));
    const customResponseBodies: Record<string, CfnWebACL.CustomResponseBodyProperty> = {};
    const rules = BODY_LIMIT_RULES.map((rule, priority): CfnWebACL.RuleProperty => {
      const bodyKey = `tooLarge${rule.limit}`;
      customResponseBodies[bodyKey] = {
        contentType: "APPLICATION_JSON",
        content: JSON.stringify(errors.payloadTooLarge(rule.limit).toBody()),
      };
      const overLimit: CfnWebACL.StatementProperty = {
        regexMatchStatement: {
          fieldToMatch: { singleHeader: { Name: "content-length" } },
          regexString: decimalAbove(rule.limit),
          textTransformations: [{ priority: 0, type: "NONE" }],
        },
      };
      const statement: CfnWebACL.StatementProperty = rule.paths
        ? {
            andStatement: {
              statements: [
                {
                  regexMatchStatement: {
                    fieldToMatch: { uriPath: {} },
                    regexString: pathsRegex(STAGE_NAME, rule.paths),
                    textTransformations: [{ priority: 0, type: "NONE" }],
                  },
                },
                overLimit,
              ],
            },
          }
        : overLimit;
      return {
        name: rule.name,
        priority,
        statement,
        action: {
          block: {
            customResponse: { responseCode: 413, customResponseBodyKey: bodyKey, responseHeaders },
          },
        },
        visibilityConfig: metric(rule.name),
      };
    });
    this.webAcl = new CfnWebACL(this, "WebAcl", {
      scope: "REGIONAL",
      defaultAction: { allow: {} },
      visibilityConfig: metric("requests"),
      customResponseBodies,
      rules,
    });
    new CfnWebACLAssociation(this, "Association", {
      resourceArn: restApi.deploymentStage.stageArn,
      webAclArn: this.webAcl.attrArn,
    });
  }
}
