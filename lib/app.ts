import { type App, Validations } from "aws-cdk-lib";
import { AwsSolutionsChecks } from "cdk-nag";
import { DmtStack } from "./stack";

/** Context keys (`cdk deploy -c dmt:domainName=api.example.com ...`, or `context` in cdk.json). */
export const CONTEXT = {
  stackName: "dmt:stackName",
  domainName: "dmt:domainName",
  certificateArn: "dmt:certificateArn",
  retainData: "dmt:retainData",
} as const;

/**
 * The CDK app: the stack from context, checked by cdk-nag's AwsSolutions pack (synthesis fails on any
 * finding that is not acknowledged next to its resource). `bin/app.ts` and the tests both use this.
 */
export function defineApp(app: App): DmtStack {
  const context = (key: string): unknown => app.node.tryGetContext(key);
  const domainName = context(CONTEXT.domainName);
  const certificateArn = context(CONTEXT.certificateArn);
  if ((domainName === undefined) !== (certificateArn === undefined)) {
    throw new Error(`Set both ${CONTEXT.domainName} and ${CONTEXT.certificateArn}, or neither.`);
  }
  const retainData = context(CONTEXT.retainData);
  const stack = new DmtStack(app, String(context(CONTEXT.stackName) ?? "Dmt"), {
    description: "dmt: metering gateway for language-model vendors",
    env: { account: process.env.CDK_DEFAULT_ACCOUNT, region: process.env.CDK_DEFAULT_REGION },
    retainData: !(retainData === false || retainData === "false"),
    ...(domainName !== undefined && {
      domain: { name: String(domainName), certificateArn: String(certificateArn) },
    }),
  });
  Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
  return stack;
}
