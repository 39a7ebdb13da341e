import { Stack } from "aws-cdk-lib";
import type { RestApi } from "aws-cdk-lib/aws-apigateway";
import { CfnWebACL, CfnWebACLAssociation } from "aws-cdk-lib/aws-wafv2";
import { Construct } from "constructs";
import { SECURITY_HEADERS } from "../lambda/app/security-headers";
import { errors } from "../lambda/core/errors";

/**
 * The largest body a function behind the API takes: Lambda's 6 MB request payload counts the whole
 * event, and the API passes every body as binary, so base64 (4/3) and the event's headers and context
 * come on top. 4 MiB encodes to 5.33 MiB, leaving ~650 KiB for the rest.
 */
export const LAMBDA_BODY_LIMIT = 4 * 1024 * 1024;

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
 * An AWS WAF web ACL on the API's stage whose one rule answers a request declaring a body over
 * `LAMBDA_BODY_LIMIT` (its Content-Length) with 413 in the service's error shape, before the
 * authorizer or any function runs. Everything else is allowed. A chunked body declares no length and
 * passes: the function's own limit (Lambda's 413) stays the backstop for it (docs/aws.md).
 */
export class RequestSizeRule extends Construct {
  readonly webAcl: CfnWebACL;

  constructor(scope: Construct, id: string, restApi: RestApi) {
    super(scope, id);
    const error = errors.payloadTooLarge(LAMBDA_BODY_LIMIT);
    // Security headers only: WAF sets the content type from the body, and the connection is its own.
    const headers = SECURITY_HEADERS;
    const metric = (name: string) => ({
      cloudWatchMetricsEnabled: true,
      metricName: `${Stack.of(this).stackName}-${name}`,
      sampledRequestsEnabled: false,
    });
    this.webAcl = new CfnWebACL(this, "WebAcl", {
      scope: "REGIONAL",
      defaultAction: { allow: {} },
      visibilityConfig: metric("requests"),
      customResponseBodies: {
        tooLarge: { contentType: "APPLICATION_JSON", content: JSON.stringify(error.toBody()) },
      },
      rules: [
        {
          name: "BodyOverLambdaLimit",
          priority: 0,
          statement: {
            regexMatchStatement: {
              fieldToMatch: { singleHeader: { Name: "content-length" } },
              regexString: decimalAbove(LAMBDA_BODY_LIMIT),
              textTransformations: [{ priority: 0, type: "NONE" }],
            },
          },
          action: {
            block: {
              customResponse: {
                responseCode: error.status,
                customResponseBodyKey: "tooLarge",
                responseHeaders: Object.entries(headers).map(([name, value]) => ({ name, value })),
              },
            },
          },
          visibilityConfig: metric("body-over-limit"),
        },
      ],
    });
    new CfnWebACLAssociation(this, "Association", {
      resourceArn: restApi.deploymentStage.stageArn,
      webAclArn: this.webAcl.attrArn,
    });
  }
}
