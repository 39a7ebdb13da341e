/**
 * Bodies over the functions' limit are refused by AWS WAF in front of the API, in the service's 413
 * shape, when `dmt:requestSizeRule` is on; without it there is no web ACL (and no WAF bill).
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { App } from "aws-cdk-lib";
import { Template } from "aws-cdk-lib/assertions";
import { afterAll, describe, expect, it } from "vitest";
import { SECURITY_HEADERS } from "../../lambda/app/security-headers";
import { defineApp } from "../../lib/app";
import { REPO_ROOT } from "../../lib/lambda-defaults";
import { decimalAbove, LAMBDA_BODY_LIMIT } from "../../lib/request-size";
import { BUNDLING_TIMEOUT_MS } from "../support/timeouts";

const CDK_JSON_CONTEXT = JSON.parse(readFileSync(join(REPO_ROOT, "cdk.json"), "utf8")).context as Record<
  string,
  unknown
>;
const outdirs: string[] = [];
afterAll(() => {
  for (const dir of outdirs) rmSync(dir, { recursive: true, force: true });
});

function synth(context: Record<string, unknown>): Template {
  const outdir = mkdtempSync(join(tmpdir(), "dmt-cdk-"));
  outdirs.push(outdir);
  const app = new App({
    outdir,
    context: { ...CDK_JSON_CONTEXT, ...context, "aws:cdk:bundling-stacks": [] },
  });
  const stack = defineApp(app);
  // Throws on any cdk-nag finding nobody acknowledged.
  return Template.fromJSON(app.synth().getStackByName(stack.stackName).template);
}

describe("decimalAbove (a Content-Length compared as text)", () => {
  const matches = (limit: number, value: string) => new RegExp(decimalAbove(limit)).test(value);

  it("matches exactly the numbers above the limit", () => {
    const limit = LAMBDA_BODY_LIMIT;
    for (const n of [0, 1, 999, limit - 1, limit, 1_000_000, 3_999_999])
      expect(matches(limit, String(n))).toBe(false);
    for (const n of [
      limit + 1,
      limit + 10,
      4_200_000,
      4_194_310,
      5_000_000,
      6 * 1024 * 1024 + 1,
      9_999_999,
      10_000_000,
      25 * 1024 * 1024,
    ]) {
      expect(matches(limit, String(n))).toBe(true);
    }
    expect(matches(limit, `000${limit + 1}`)).toBe(true);
    expect(matches(limit, `000${limit}`)).toBe(false);
    expect(matches(limit, "4194305 ")).toBe(false);
    expect(matches(limit, "abc")).toBe(false);
  });

  it("agrees with numeric comparison around other limits, nines and zeros included", () => {
    for (const limit of [9, 10, 99, 100, 1_048_576, 6_291_456, 9_990_999, 10_000_000]) {
      for (let n = Math.max(0, limit - 1500); n <= limit + 1500; n += 7) {
        expect(matches(limit, String(n)), `${n} vs ${limit}`).toBe(n > limit);
      }
      for (const n of [limit * 10, limit * 10 + 1, Math.floor(limit / 10)])
        expect(matches(limit, String(n))).toBe(n > limit);
    }
  });
});

describe("the request size rule", () => {
  it(
    "answers a body declared over 4 MiB with 413 in the service's shape, before the API, when asked for",
    () => {
      const template = synth({ "dmt:requestSizeRule": "true" });
      const acls = template.findResources("AWS::WAFv2::WebACL");
      expect(Object.keys(acls)).toHaveLength(1);
      const [aclId, acl] = Object.entries(acls)[0] as [string, { Properties: Record<string, unknown> }];
      const props = acl.Properties as {
        Scope: string;
        DefaultAction: unknown;
        CustomResponseBodies: Record<string, { ContentType: string; Content: string }>;
        Rules: {
          Statement: { RegexMatchStatement: { FieldToMatch: unknown; RegexString: string } };
          Action: {
            Block: {
              CustomResponse: {
                ResponseCode: number;
                CustomResponseBodyKey: string;
                ResponseHeaders: { Name: string; Value: string }[];
              };
            };
          };
        }[];
      };
      expect(props.Scope).toBe("REGIONAL");
      expect(props.DefaultAction).toEqual({ Allow: {} });
      expect(props.Rules).toHaveLength(1);
      const [rule] = props.Rules;
      expect(rule?.Statement.RegexMatchStatement.FieldToMatch).toEqual({
        SingleHeader: { Name: "content-length" },
      });
      expect(rule?.Statement.RegexMatchStatement.RegexString).toBe(decimalAbove(4 * 1024 * 1024));
      const response = rule?.Action.Block.CustomResponse;
      expect(response?.ResponseCode).toBe(413);
      const body = props.CustomResponseBodies[response?.CustomResponseBodyKey ?? ""];
      expect(body?.ContentType).toBe("APPLICATION_JSON");
      expect(JSON.parse(body?.Content ?? "")).toEqual({
        error: {
          type: "invalid_request_error",
          code: "payload_too_large",
          message: "Request body exceeds the limit of 4194304 bytes.",
        },
      });
      expect(Object.fromEntries((response?.ResponseHeaders ?? []).map((h) => [h.Name, h.Value]))).toEqual(
        SECURITY_HEADERS,
      );
      // On the API's one stage.
      template.hasResourceProperties("AWS::WAFv2::WebACLAssociation", {
        WebACLArn: { "Fn::GetAtt": [aclId, "Arn"] },
      });
      const [association] = Object.values(template.findResources("AWS::WAFv2::WebACLAssociation")) as {
        Properties: { ResourceArn: unknown };
      }[];
      expect(JSON.stringify(association?.Properties.ResourceArn)).toContain("/stages/");
    },
    BUNDLING_TIMEOUT_MS,
  );

  it(
    "is not there by default",
    () => {
      expect(Object.keys(synth({}).findResources("AWS::WAFv2::WebACL"))).toHaveLength(0);
    },
    BUNDLING_TIMEOUT_MS,
  );
});
