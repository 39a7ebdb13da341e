/**
 * Bodies over their route's limit are refused by AWS WAF in front of the API, in the service's 413
 * shape, unless `dmt:requestSizeRule=false` (then there is no web ACL, and no WAF bill). The web ACL as
 * synthesized is evaluated here for a request and its answer compared with the local server's.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { App } from "aws-cdk-lib";
import { Template } from "aws-cdk-lib/assertions";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DATA_API_BODY_LIMIT } from "../../lambda/app/body";
import { SECURITY_HEADERS } from "../../lambda/app/security-headers";
import { UPLOAD_BODY_LIMIT } from "../../lambda/vendors/routes";
import { STAGE_NAME } from "../../lib/api";
import { defineApp } from "../../lib/app";
import { REPO_ROOT } from "../../lib/lambda-defaults";
import { DATA_API_BODY_PATHS, decimalAbove, LAMBDA_BODY_LIMIT, pathsRegex } from "../../lib/request-size";
import { startTestHost, type TestHost } from "../support/host";
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

/** The parts of a synthesized web ACL this evaluation reads. */
interface Statement {
  RegexMatchStatement?: {
    FieldToMatch: { SingleHeader?: { Name: string }; UriPath?: Record<string, never> };
    RegexString: string;
    TextTransformations: { Type: string }[];
  };
  AndStatement?: { Statements: Statement[] };
}
interface WebAclProps {
  Scope: string;
  DefaultAction: unknown;
  CustomResponseBodies: Record<string, { ContentType: string; Content: string }>;
  Rules: {
    Name: string;
    Priority: number;
    Statement: Statement;
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
}

interface Answer {
  status: number;
  contentType: string;
  headers: Record<string, string>;
  body: string;
}

/**
 * What the web ACL answers a request (undefined: allowed on to the API), as WAF evaluates it: rules
 * by priority, the first that matches acts. Only the statements the stack uses are known here; any
 * other fails the test rather than being skipped.
 */
function wafAnswer(acl: WebAclProps, request: { path: string; headers: Record<string, string> }) {
  const matches = (statement: Statement): boolean => {
    if (statement.AndStatement) return statement.AndStatement.Statements.every(matches);
    const regex = statement.RegexMatchStatement;
    if (!regex) throw new Error(`a statement this evaluation does not know: ${JSON.stringify(statement)}`);
    expect(regex.TextTransformations.map((t) => t.Type)).toEqual(["NONE"]);
    const field = regex.FieldToMatch;
    const text = field.UriPath ? request.path : request.headers[field.SingleHeader?.Name.toLowerCase() ?? ""];
    return text !== undefined && new RegExp(regex.RegexString).test(text);
  };
  const rule = [...acl.Rules].sort((a, b) => a.Priority - b.Priority).find((r) => matches(r.Statement));
  if (!rule) return undefined;
  const response = rule.Action.Block.CustomResponse;
  const body = acl.CustomResponseBodies[response.CustomResponseBodyKey];
  return {
    status: response.ResponseCode,
    contentType: body?.ContentType === "APPLICATION_JSON" ? "application/json" : String(body?.ContentType),
    headers: Object.fromEntries(response.ResponseHeaders.map((h) => [h.Name.toLowerCase(), h.Value])),
    body: body?.Content ?? "",
  } satisfies Answer;
}

function webAcl(template: Template): { id: string; props: WebAclProps } {
  const acls = Object.entries(template.findResources("AWS::WAFv2::WebACL"));
  expect(acls).toHaveLength(1);
  const [id, acl] = acls[0] as [string, { Properties: WebAclProps }];
  return { id, props: acl.Properties };
}

const SIX_MB_AND_ONE = 6 * 1024 * 1024 + 1;

describe("the request size rule", () => {
  let template: Template;
  let host: TestHost;
  let key: string;
  beforeAll(async () => {
    template = synth({});
    host = await startTestHost();
    ({ key } = await host.newKey());
  }, BUNDLING_TIMEOUT_MS);
  afterAll(async () => {
    await host?.stop();
  });

  /** The local server's answer to `body` on `path`, as the wire carried it. */
  async function local(
    path: string,
    body: Uint8Array<ArrayBuffer>,
    headers: Record<string, string> = {},
  ): Promise<Answer> {
    const res = await fetch(`${host.url}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json", ...headers },
      body,
    });
    const answer = {
      status: res.status,
      contentType: (res.headers.get("content-type") ?? "").split(";")[0] ?? "",
      headers: Object.fromEntries(
        Object.keys(SECURITY_HEADERS).map((n) => [n.toLowerCase(), res.headers.get(n) ?? ""]),
      ),
      body: await res.text(),
    };
    return answer;
  }

  it("is on by default: a REGIONAL web ACL on the API's one stage, allowing what no rule refuses", () => {
    const { id, props } = webAcl(template);
    expect(props.Scope).toBe("REGIONAL");
    expect(props.DefaultAction).toEqual({ Allow: {} });
    expect(props.Rules.map((r) => r.Name)).toEqual(["DataApiBodyOverLimit", "BodyOverLambdaLimit"]);
    template.hasResourceProperties("AWS::WAFv2::WebACLAssociation", {
      WebACLArn: { "Fn::GetAtt": [id, "Arn"] },
    });
    const associations = Object.values(template.findResources("AWS::WAFv2::WebACLAssociation")) as {
      Properties: { ResourceArn: unknown };
    }[];
    expect(associations).toHaveLength(1);
    expect(JSON.stringify(associations[0]?.Properties.ResourceArn)).toContain("/stages/");
  });

  it("lets through bodies within the limits, and requests that declare no length", () => {
    const { props } = webAcl(template);
    for (const path of ["/openai/v1/audio/transcriptions", `/${STAGE_NAME}/anthropic/v1/messages`])
      for (const length of [0, 1024, LAMBDA_BODY_LIMIT])
        expect(wafAnswer(props, { path, headers: { "content-length": String(length) } })).toBeUndefined();
    for (const path of DATA_API_BODY_PATHS)
      expect(
        wafAnswer(props, { path, headers: { "content-length": String(DATA_API_BODY_LIMIT) } }),
      ).toBeUndefined();
    expect(wafAnswer(props, { path: "/openai/v1/chat/completions", headers: {} })).toBeUndefined();
  });

  it(
    "answers a 6 MB + 1 byte upload with 413 invalid_request_error / payload_too_large, in the local server's shape",
    async () => {
      const { props } = webAcl(template);
      const path = "/openai/v1/audio/transcriptions";
      const upload = { "content-type": "multipart/form-data; boundary=x" };
      const aws = wafAnswer(props, {
        path: `/${STAGE_NAME}${path}`,
        headers: { "content-length": String(SIX_MB_AND_ONE) },
      });
      // Locally an upload takes up to 25 MiB, so the local refusal compared is one over that limit: the
      // same status, headers and body, the limit in the message being each deployment's own.
      const refused = await local(path, new Uint8Array(UPLOAD_BODY_LIMIT + 1), upload);
      expect(refused.status).toBe(413);
      expect(JSON.parse(refused.body)).toEqual({
        error: {
          type: "invalid_request_error",
          code: "payload_too_large",
          message: `Request body exceeds the limit of ${UPLOAD_BODY_LIMIT} bytes.`,
        },
      });
      expect(aws).toEqual({
        ...refused,
        body: refused.body.replace(String(UPLOAD_BODY_LIMIT), String(LAMBDA_BODY_LIMIT)),
      });
      // On a custom domain (no stage in the path) and on every vendor alike.
      for (const other of [
        path,
        "/gemini/v1beta/models/x:generateContent",
        `/${STAGE_NAME}/groq/openai/v1/chat/completions`,
      ])
        expect(
          wafAnswer(props, { path: other, headers: { "content-length": String(SIX_MB_AND_ONE) } }),
        ).toEqual(aws);
    },
    BUNDLING_TIMEOUT_MS,
  );

  it(
    "answers the data API's bodies over 1 MiB exactly as the local server does, at any size",
    async () => {
      const { props } = webAcl(template);
      for (const path of DATA_API_BODY_PATHS) {
        for (const size of [DATA_API_BODY_LIMIT + 1, SIX_MB_AND_ONE]) {
          const refused = await local(path, new Uint8Array(size));
          expect(refused.status, `${path} ${size}`).toBe(413);
          for (const awsPath of [path, `/${STAGE_NAME}${path}`])
            expect(wafAnswer(props, { path: awsPath, headers: { "content-length": String(size) } })).toEqual(
              refused,
            );
        }
      }
    },
    BUNDLING_TIMEOUT_MS,
  );

  it("compares Content-Length as a number and paths exactly", () => {
    expect(pathsRegex(STAGE_NAME, DATA_API_BODY_PATHS)).toBe("^(/prod)?(/api/v1/exports|/api/v1/data)$");
    const paths = new RegExp(pathsRegex(STAGE_NAME, DATA_API_BODY_PATHS));
    for (const path of ["/api/v1/exports", "/prod/api/v1/data"]) expect(paths.test(path)).toBe(true);
    for (const path of [
      "/api/v1/exports/x",
      "/staging/api/v1/data",
      "/openai/api/v1/exports",
      "/api/v1/datas",
    ])
      expect(paths.test(path)).toBe(false);
    expect(new RegExp(pathsRegex("a.b", ["/x"])).test("/aXb/x")).toBe(false);
  });

  it(
    "is not there with dmt:requestSizeRule=false, and any other value fails the synth",
    () => {
      expect(
        Object.keys(synth({ "dmt:requestSizeRule": "false" }).findResources("AWS::WAFv2::WebACL")),
      ).toHaveLength(0);
      expect(() => synth({ "dmt:requestSizeRule": "off" })).toThrow(
        /dmt:requestSizeRule must be true or false/,
      );
    },
    BUNDLING_TIMEOUT_MS,
  );
});
